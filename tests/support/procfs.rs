//! What /proc says about a process: its threads, its memory, its CPU time. Shared by the
//! integration tests and, through `#[path]`, by the benchmarks (benches/).
#![allow(dead_code)]

/// The names of a process's threads.
pub fn threads(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The thread names once every thread has named itself: a thread just started still carries
/// the process's name (`gjc`) until its first instructions set its own, so a snapshot taken in
/// that moment would count one thread twice under another name. Only the main thread is `gjc`.
pub fn named_threads(pid: u32) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut names = threads(pid);
        let unnamed = names.iter().filter(|n| n.as_str() == "gjc").count();
        if unnamed <= 1 || std::time::Instant::now() >= deadline {
            names.sort();
            return names;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Each thread's name with its scheduling policy (field 41 of its `stat`: 0 is `SCHED_OTHER`,
/// 3 `SCHED_BATCH`).
pub fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // The name, in parentheses, may hold spaces: count fields after its end (state is 3).
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_string();
            let policy = rest.split_whitespace().nth(41 - 3)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

/// A field of /proc/<pid>/status in KiB (`VmRSS:`, `VmHWM:`; the colon is optional).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = field.trim_end_matches(':');
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The CPU time (user + system) of a process's threads, living and exited, in milliseconds; the
/// kernel counts it in clock ticks, so it moves in steps of 10 ms.
pub fn cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it are space-separated.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 * 1000.0 / hz)
}

/// The time the threads of `pid` that are still running have spent on a CPU, in ms, from each
/// one's `schedstat` (ns): precise where `cpu_ms` moves in 10 ms ticks, but a thread that has
/// ended no longer counts, so it measures a stretch in which no thread ends.
#[allow(dead_code)]
pub fn threads_cpu_ms(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(ns as f64 / 1e6)
}

/// The time a thread of `pid` named `name` has spent on a CPU so far, in ns
/// (`/proc/<pid>/task/<tid>/schedstat`): unlike wall time, barely moved by other load.
pub fn thread_cpu_ns(pid: u32, name: &str) -> Option<u64> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}
