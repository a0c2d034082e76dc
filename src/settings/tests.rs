use std::collections::HashMap;

use super::*;

fn from(pairs: &[(&str, &str)]) -> Settings {
    let vars: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::from_vars(|name| vars.get(name).cloned())
}

#[test]
fn defaults_without_any_variable() {
    let s = from(&[]);
    assert_eq!(s.agent_dir, PathBuf::from("/.gjc/agent"));
    assert_eq!(s.home, None);
    assert_eq!(s.max_line_bytes, 64 << 20);
    assert_eq!(s.sse, SseLimits::default());
    assert_eq!(s.stream_idle_timeout, Duration::from_secs(300));
    assert_eq!(s.retry_base, Duration::from_secs(2));
    assert_eq!(s.retry_after_max, Duration::from_secs(60));
    assert_eq!(s.compact_keep_tokens, 20_000);
    assert_eq!(s.compaction_strategy, CompactionStrategy::ContextFull);
    assert_eq!(s.output_backlog_bytes, crate::output::HIGH);
    assert_eq!(s.todo_reminders, DEFAULT_REMINDERS);
    assert_eq!(s.landlock_abi_cap, None);
    assert!(!s.emit_title);
    assert_eq!(s.test_panic, None);
    assert!(!s.test_abort_after_gate_accept);
}

#[test]
fn every_variable_is_read() {
    let s = from(&[
        ("HOME", "/home/u"),
        ("GJC_MAX_LINE_BYTES", "100"),
        ("GJC_SSE_MAX_LINE_BYTES", "200"),
        ("GJC_SSE_MAX_EVENT_BYTES", " 300 "),
        ("GJC_STREAM_IDLE_TIMEOUT_MS", "40"),
        ("GJC_RETRY_BASE_MS", "5"),
        ("GJC_RETRY_AFTER_MAX_MS", "6"),
        ("GJC_COMPACT_KEEP_TOKENS", "7"),
        ("GJC_COMPACTION_STRATEGY", "handoff"),
        ("GJC_OUTPUT_BACKLOG_BYTES", "8"),
        ("GJC_TODO_REMINDERS", "off"),
        ("GJC_LANDLOCK_ABI", "0"),
        ("GJC_RPC_EMIT_TITLE", " Yes"),
        ("GJC_TEST_PANIC", "gjc-session"),
        ("GJC_TEST_ABORT_AFTER_GATE_ACCEPT", ""),
    ]);
    assert_eq!(s.home, Some(PathBuf::from("/home/u")));
    assert_eq!(s.agent_dir, PathBuf::from("/home/u/.gjc/agent"));
    assert_eq!(s.max_line_bytes, 100);
    assert_eq!(
        s.sse,
        SseLimits {
            line: 200,
            event: 300
        }
    );
    assert_eq!(s.stream_idle_timeout, Duration::from_millis(40));
    assert_eq!(s.retry_base, Duration::from_millis(5));
    assert_eq!(s.retry_after_max, Duration::from_millis(6));
    assert_eq!(s.compact_keep_tokens, 7);
    assert_eq!(s.compaction_strategy, CompactionStrategy::Handoff);
    assert_eq!(s.output_backlog_bytes, 8);
    assert_eq!(s.todo_reminders, 0);
    assert_eq!(s.landlock_abi_cap, Some(0));
    assert!(s.emit_title);
    assert_eq!(s.test_panic.as_deref(), Some("gjc-session"));
    assert!(s.test_abort_after_gate_accept);
}

#[test]
fn the_agent_dir_variable_wins_over_home_unless_empty() {
    let s = from(&[("HOME", "/home/u"), ("GJC_CODING_AGENT_DIR", "/srv/agent")]);
    assert_eq!(s.agent_dir, PathBuf::from("/srv/agent"));
    let s = from(&[("HOME", "/home/u"), ("GJC_CODING_AGENT_DIR", "")]);
    assert_eq!(s.agent_dir, PathBuf::from("/home/u/.gjc/agent"));
}

#[test]
fn bad_values_fall_back_to_the_defaults() {
    let s = from(&[
        ("GJC_MAX_LINE_BYTES", "0"),
        ("GJC_SSE_MAX_LINE_BYTES", "-1"),
        ("GJC_SSE_MAX_EVENT_BYTES", "lots"),
        ("GJC_STREAM_IDLE_TIMEOUT_MS", "1.5"),
        ("GJC_RETRY_BASE_MS", ""),
        ("GJC_RETRY_AFTER_MAX_MS", "soon"),
        ("GJC_COMPACT_KEEP_TOKENS", "many"),
        ("GJC_COMPACTION_STRATEGY", "Handoff"),
        ("GJC_OUTPUT_BACKLOG_BYTES", "0"),
        ("GJC_TODO_REMINDERS", "lots"),
        ("GJC_LANDLOCK_ABI", "new"),
        ("GJC_RPC_EMIT_TITLE", "2"),
    ]);
    assert_eq!(s, from(&[]));
}

#[test]
fn reminder_setting_parses() {
    assert_eq!(parse_reminders(None), Ok(DEFAULT_REMINDERS));
    assert_eq!(parse_reminders(Some("off")), Ok(0));
    assert_eq!(parse_reminders(Some("0")), Ok(0));
    assert_eq!(parse_reminders(Some(" 2 ")), Ok(2));
    assert_eq!(parse_reminders(Some("on")), Ok(DEFAULT_REMINDERS));
    assert_eq!(parse_reminders(Some("99")), Ok(MAX_REMINDERS));
    let err = parse_reminders(Some("lots")).unwrap_err();
    assert!(err.contains("GJC_TODO_REMINDERS"), "{err}");
}
