//! agent.py and agent.rs spell the same limits and formats.

use super::*;

/// The value agent.py assigns to `name` at the top level.
fn python_constant(name: &str) -> String {
    let prefix = format!("{name} = ");
    AGENT_SOURCE
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{name} is not in agent.py"))
        .to_string()
}

fn python_int(name: &str) -> usize {
    python_constant(name)
        .split('*')
        .map(|f| f.trim().parse::<usize>().unwrap())
        .product()
}

#[test]
fn the_agent_and_the_supervisor_agree_on_limits_and_formats() {
    assert_eq!(python_int("CHANNEL_FD"), CHANNEL_FD as usize);
    assert_eq!(python_int("CHANNEL_LOST_EXIT"), CHANNEL_LOST_EXIT as usize);
    assert_eq!(python_int("FRAME_IN_MAX"), SUPERVISOR_FRAME_MAX);
    assert_eq!(python_int("FRAME_OUT_MAX"), AGENT_FRAME_MAX);
    assert_eq!(python_int("RESULT_MAX_CHARS"), RESULT_MAX_CHARS);
    assert_eq!(python_int("LIST_MAX"), LIST_MAX);
    assert_eq!(python_int("NAME_MAX_CHARS"), NAME_MAX_CHARS);
    assert_eq!(python_int("MESSAGE_MAX_CHARS"), MESSAGE_MAX_CHARS);
    assert_eq!(python_int("MARKER_HEX_LEN"), MARKER_HEX_LEN);
    assert_eq!(
        python_constant("MARKER_PREFIX"),
        r#"b"\x00prims-cell-end-""#
    );
    assert_eq!(MARKER_PREFIX, b"\x00prims-cell-end-");
    assert_eq!(python_constant("MARKER_SUFFIX"), r#"b"\x00""#);
    assert_eq!(MARKER_SUFFIX, b"\x00");
    assert_eq!(python_constant("PREWARM_ENV"), format!("{PREWARM_ENV:?}"));
    assert_eq!(python_constant("SITE_ENV"), format!("{SITE_ENV:?}"));
    // The notebook half.
    assert_eq!(python_constant("KERNEL_ENV"), format!("{KERNEL_ENV:?}"));
    assert_eq!(python_constant("FIGURES_REL"), format!("{FIGURES_REL:?}"));
    assert_eq!(python_int("OUTPUTS_MAX"), OUTPUTS_MAX);
    assert_eq!(python_int("OUTPUTS_BYTES_MAX"), OUTPUTS_BYTES_MAX);
    let mimes: Vec<String> = AGENT_SOURCE
        .lines()
        .skip_while(|l| *l != "MIME_KEPT = (")
        .skip(1)
        .take_while(|l| *l != ")")
        .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_string())
        .collect();
    assert_eq!(mimes, MIME_KEPT);
    // The fork-template half.
    assert_eq!(python_constant("TEMPLATE_ENV"), format!("{TEMPLATE_ENV:?}"));
    assert_eq!(
        python_constant("ALLOCATOR_ENV"),
        format!("{ALLOCATOR_ENV:?}")
    );
    let blas: Vec<String> = BLAS_THREADS.iter().map(|v| format!("{v:?}")).collect();
    assert_eq!(
        python_constant("BLAS_THREADS"),
        format!("({})", blas.join(", "))
    );
}

#[test]
fn markers_are_checked_and_framed() {
    assert!(is_marker_hex("0123456789abcdef0123456789abcdef"));
    assert!(!is_marker_hex("0123456789ABCDEF0123456789abcdef"));
    assert!(!is_marker_hex("0123456789abcdef0123456789abcde"));
    assert!(!is_marker_hex("0123456789abcdef0123456789abcdeg"));
    assert_eq!(
        marker_bytes("0123456789abcdef0123456789abcdef"),
        b"\0prims-cell-end-0123456789abcdef0123456789abcdef\0"
    );
}
