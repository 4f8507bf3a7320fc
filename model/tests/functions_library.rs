//! The library's shape fits Redis Functions (issue 22; docs/design-notes.md, "The Lua library's
//! shape"): one chunk of the prelude, every lib file once and each script's body as a function of
//! (KEYS, ARGV), as `FUNCTION LOAD` would take it, compiles under Lua 5.1's limits (200 locals
//! and 60 upvalues per function) and loads without touching Redis: the lib files' top level only
//! defines constants and functions, and every call's state lives in the context it makes.

/// The chunk: the prelude, the lib files in their canonical order, then a table of one function
/// per script, returned.
fn library_chunk() -> String {
    let mut src = orq_lua::prelude();
    for f in orq_lua::LIB_FILES {
        src.push('\n');
        src.push_str(f.source);
    }
    src.push_str("\nlocal FUNCTIONS = {}\n");
    for s in orq_lua::all() {
        src.push_str(&format!(
            "FUNCTIONS['{}'] = function(KEYS, ARGV)\n{}\nend\n",
            s.name, s.body
        ));
    }
    src.push_str("return FUNCTIONS\n");
    src
}

// Goal: every script as a function of one shared library chunk compiles and the chunk's top level
// runs without Redis (no `redis.call`, no KEYS or ARGV read at load time).
#[test]
fn the_library_and_every_script_load_as_one_chunk() {
    let lua = mlua::Lua::new();
    // No `redis` global: a lib file that called Redis at its top level fails here.
    let functions: mlua::Table = lua
        .load(library_chunk())
        .set_name("library")
        .eval()
        .unwrap_or_else(|e| panic!("the library chunk does not load: {e}"));
    for s in orq_lua::all() {
        let f: mlua::Value = functions.get(s.name).expect("a table entry");
        assert!(f.is_function(), "{} is not a function of the chunk", s.name);
    }
}
