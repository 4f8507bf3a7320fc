//! Compiled chunks shared by every Lua state of the process.
//!
//! Each simulated seed starts a fresh model, which loads orq's function library (about 100 KB
//! of Lua) again, and so does every simulated script flush: parsing it was about 4 % of the
//! simulator's time. The bytecode of a chunk that compiled is kept here, keyed by its name and
//! source, and loaded again without parsing. Bytecode keeps its debug information (source
//! name, line numbers), so error texts are the same. Only chunks that compiled are kept; a
//! syntax error is reported from the source each time.

use mlua::{ChunkMode, Function, Lua};
use std::sync::Mutex;

/// Most chunks kept; the oldest goes first. The model loads orq's library and the few scripts
/// its tests send, so a handful suffices; the bound keeps arbitrary sources from growing it.
const KEPT_MAX: usize = 16;

/// `(name, source, bytecode)`, most recently added last.
static KEPT: Mutex<Vec<(String, String, Vec<u8>)>> = Mutex::new(Vec::new());

/// `source` compiled as a chunk called `name`, from the kept bytecode when there is one.
/// Errors: the compile error of `source`.
pub(super) fn load(lua: &Lua, name: &str, source: &str) -> mlua::Result<Function> {
    let kept = {
        let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .find(|(n, s, _)| n == name && s == source)
            .map(|(_, _, code)| code.clone())
    };
    if let Some(code) = kept {
        return lua
            .load(code)
            .set_name(name)
            .set_mode(ChunkMode::Binary)
            .into_function();
    }
    let func = lua
        .load(source)
        .set_name(name)
        .set_mode(ChunkMode::Text)
        .into_function()?;
    let code = func.dump(false);
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() >= KEPT_MAX {
        kept.remove(0);
    }
    kept.push((name.to_string(), source.to_string(), code));
    Ok(func)
}
