//! Documentation checks: every command the decoder knows is documented.

#[test]
fn every_command_is_in_the_protocol_doc() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md")).unwrap();
    for name in ::gjc::protocol::Command::NAMES
        .iter()
        .chain(::gjc::protocol::HostReply::NAMES)
    {
        assert!(
            doc.contains(&format!("`{name}")),
            "docs/protocol.md does not mention `{name}`"
        );
    }
}
