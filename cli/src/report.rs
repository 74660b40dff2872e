//! How a subcommand's failure reaches the terminal.

/// The error and its causes on one line, skipping a cause whose text the
/// message already includes (library errors often embed their source).
pub fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The exit status of a subcommand that returns nothing on success: 0, or
/// 1 after printing `prims <name>: <error>`.
pub fn exit_status(name: &str, result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("prims {name}: {}", render(&e));
            1
        }
    }
}
