//! The host without a process: sessions start on their own threads, commands reach the session
//! they are sent to, frames come back tagged with it, and closing one leaves the others running.

use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::output::OutRx;
use crate::protocol::{Command, Outbound};

const WAIT: Duration = Duration::from_secs(20);

fn blueprint(agent_dir: &std::path::Path) -> Blueprint {
    Blueprint {
        catalog: std::sync::Arc::new(crate::provider::catalog::Catalog::load(agent_dir)),
        model: None,
        thinking: "off",
        tool_names: Vec::new(),
        script: None,
        project: crate::session::project::ProjectOptions {
            agent_dir: agent_dir.to_path_buf(),
            ..Default::default()
        },
        persistent: false,
        compact_updates: true,
        policy: Default::default(),
        transport: "stdio",
        settings: Default::default(),
    }
}

fn get_state(live: &Live, id: &str) {
    let command = Command::decode("get_state", json!({})).unwrap().unwrap();
    let frame = CommandFrame::command(Some(Value::String(id.into())), command);
    assert!(live.command(frame));
}

/// The next response on the lane: its tag, its id and the session id it reports.
fn response(frames: &OutRx) -> (u64, String, String) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let queued = match frames.try_recv() {
            Ok(q) => q,
            Err(_) => {
                assert!(!left.is_zero(), "no response in time");
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
        };
        let (session, cost) = (queued.session, queued.cost());
        frames.written(cost);
        if let Outbound::Response(r) = queued.frame {
            let data: Value = serde_json::from_str(r.data.as_ref().unwrap().get()).unwrap();
            let id = r.id.unwrap().as_str().unwrap().to_string();
            return (session, id, data["sessionId"].as_str().unwrap().to_string());
        }
    }
}

#[test]
fn sessions_start_route_and_close_independently() {
    let agent = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(agent.path()).unwrap();
    let (out, frames, _drained) = crate::output::lane();
    let (bash, bash_thread) = crate::exec::spawn(std::env::temp_dir(), false, None).unwrap();
    let (broker, broker_thread) = crate::host::spawn(out.clone()).unwrap();
    let (mut host, ended) =
        SessionHost::new(blueprint(agent.path()), bash.clone(), broker.clone(), out);
    let a = host.start(None, cwd.clone()).unwrap().live;
    let b = host
        .start(Some("0190aaaa-0000-7000-8000-000000000001".into()), cwd)
        .unwrap()
        .live;
    assert_ne!(a.number, b.number);
    assert_eq!(b.id, "0190aaaa-0000-7000-8000-000000000001");
    assert_eq!(host.running(), 2);

    get_state(&b, "to-b");
    assert_eq!(response(&frames), (b.number, "to-b".into(), b.id.clone()));
    get_state(&a, "to-a");
    assert_eq!(response(&frames), (a.number, "to-a".into(), a.id.clone()));

    a.close();
    assert_eq!(ended.recv_timeout(WAIT), Ok(a.number));
    host.reap(a.number);
    assert_eq!(host.running(), 1);
    // The other session still answers, and the first takes nothing more.
    get_state(&b, "again");
    assert_eq!(response(&frames), (b.number, "again".into(), b.id.clone()));
    assert!(!a.command(CommandFrame::Policy(Default::default())));

    b.close();
    assert_eq!(ended.recv_timeout(WAIT), Ok(b.number));
    host.reap(b.number);
    drop(host);
    bash.shutdown();
    broker.shutdown("test over");
    bash_thread.join().unwrap();
    broker_thread.join().unwrap();
}

/// Every session allocates its provider lane's slots when it starts, idle or not: the events
/// are boxed so that a slot stays a few words (unboxed, the lane was 52 KB).
#[test]
fn the_provider_lane_preallocates_little() {
    // A slot is the message and a stamp.
    let slot = std::mem::size_of::<crate::provider::ProviderMsg>() + std::mem::size_of::<usize>();
    assert!(
        slot * super::PROVIDER_QUEUE <= 16 * 1024,
        "{slot} bytes a slot, {} KB a lane",
        slot * super::PROVIDER_QUEUE / 1024
    );
}
