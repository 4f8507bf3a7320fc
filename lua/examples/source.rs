//! Prints the source orq sends to Redis for one script (the generated prelude, the lib files it
//! uses, then the script): `cargo run -q -p orq-lua --example source -- enqueue`; with
//! `--library`, the Redis Functions library of every script (`FUNCTION LOAD`'s code). Tools
//! outside Rust (`bench/instructions.py`, `bench/functions.py`) read the scripts this way, so the
//! generated lines stay written once.

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--library") {
        let lib = orq_lua::functions::library();
        let _ = std::io::Write::write_all(&mut std::io::stdout(), lib.source.as_bytes());
        return;
    }
    let Some(name) = std::env::args().nth(1) else {
        eprintln!(
            "usage: source <script name> | --library  (script names: {})",
            orq_lua::NAMES.join(", ")
        );
        std::process::exit(2);
    };
    match orq_lua::get(&name) {
        // A closed pipe (`| head`) ends the output quietly.
        Some(script) => {
            let _ = std::io::Write::write_all(&mut std::io::stdout(), script.source.as_bytes());
        }
        None => {
            eprintln!(
                "no script named {name:?} (one of: {})",
                orq_lua::NAMES.join(", ")
            );
            std::process::exit(2);
        }
    }
}
