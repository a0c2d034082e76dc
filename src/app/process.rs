//! What gjc arranges with the kernel about its own process: the parent it follows, the signals
//! that stop it, and its open-file limit.

use std::time::Duration;

use crossbeam_channel::Sender;

use crate::lanes::ControlFrame;
use crate::settings::Settings;

/// The kernel's parent-death signal. Not SIGTERM: the kernel sends it when the *thread* that
/// spawned gjc exits, which a host running a thread pool does all the time, so its arrival only
/// means "look at the parent process", while a SIGTERM always means stop.
const PARENT_DEATH_SIGNAL: libc::c_int = libc::SIGUSR2;

/// The process that started gjc, as seen at the top of `main`.
#[derive(Clone, Copy, Debug)]
pub struct Parent(libc::pid_t);

impl Parent {
    pub fn current() -> Parent {
        // SAFETY: getppid has no preconditions.
        Parent(unsafe { libc::getppid() })
    }

    pub(super) fn is_gone(self) -> bool {
        Parent::current().0 != self.0
    }
}

/// Raises the soft limit on open descriptors to the hard one, as servers do: many live ACP
/// sessions each open files on use (session file, gate store, registry, trust store), and the
/// usual soft limit of 1,024 is far below what the system allows.
pub(super) fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 || limit.rlim_cur >= limit.rlim_max
        {
            return;
        }
        let soft = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
            log::debug!("the open-file limit stays at {soft}");
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP shut down as stdin EOF does; the parent-death signal does when the
/// parent process is gone.
pub(super) fn install_signal_handlers() -> Option<signal_hook::iterator::Signals> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, PARENT_DEATH_SIGNAL])
        .map_err(|e| log::warn!("cannot install signal handlers: {e}"))
        .ok()
}

pub(super) fn watch_signals(
    settings: &Settings,
    mut signals: signal_hook::iterator::Signals,
    control: Sender<ControlFrame>,
    parent: Parent,
) {
    super::spawn(settings, "gjc-signal", move || {
        for signal in signals.forever() {
            if signal != PARENT_DEATH_SIGNAL {
                let _ = control.send(ControlFrame::Shutdown("signal"));
                return;
            }
            // The spawning thread ended; only the parent process's end is ours to follow.
            if parent.is_gone() {
                let _ = control.send(ControlFrame::Shutdown("parent process exited"));
                return;
            }
        }
    });
}

/// The kernel's parent-death signal on Linux. Armed before the first check of the parent, so a
/// parent that died at any moment since `main` began is caught by one or the other. It fires
/// whenever the thread that spawned gjc exits (the setting is per thread); `watch_signals` then
/// compares the parent pid, which changes only when the whole parent process is gone.
pub(super) fn arm_parent_death() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets a process attribute.
    unsafe {
        // The kernel reads the signal as an unsigned long: pass one, not a variadic int.
        libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DEATH_SIGNAL as libc::c_ulong);
    }
}

/// A poll of the parent pid, for when the signal handlers could not be installed (the
/// parent-death signal then has no one to tell).
pub(super) fn watch_parent(settings: &Settings, control: Sender<ControlFrame>, parent: Parent) {
    super::spawn(settings, "gjc-parent", move || loop {
        std::thread::sleep(Duration::from_millis(500));
        if parent.is_gone() {
            let _ = control.send(ControlFrame::Shutdown("parent process exited"));
            return;
        }
    });
}
