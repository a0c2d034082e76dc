//! What the kernel is asked to enforce for one command, built in gjc before the command starts
//! and entered by the child between clone and exec (`enter`).
//!
//! - Landlock: every right that changes the filesystem is handled, and granted only beneath the
//!   writable roots (plus the few devices every shell writes to); reads and execution are not
//!   handled, so they stay as they were. Renames and links that would move a file across the
//!   boundary need the right on both sides (`REFER`), so they fail. When network is off and the
//!   ABI has it, TCP bind and connect are handled with no port allowed.
//! - seccomp: when network is off, `socket` and `socketpair` of any family but `AF_UNIX` fail with
//!   `EPERM`, and `io_uring_setup` too (its socket operations would pass around the filter).
//! - `PR_SET_NO_NEW_PRIVS`, which both need, and which keeps set-uid programs from shedding them.
//!
//! The ruleset is a descriptor and the filter a byte program, both made once per policy and
//! shared by every command run under it; the child only makes three system calls with them.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, ABI,
};

use super::SandboxError;

/// The first ABI that confines every write: before ABI 3, `truncate(2)` is never checked.
pub const MIN_FS_ABI: u32 = 3;
/// The first ABI with TCP rules.
const NET_ABI: u32 = 4;

/// Devices a confined shell still writes to: sinks, sources, its terminal.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The Landlock ABI gjc uses: the kernel's (asked once per process), capped by `cap`
/// (`Settings::landlock_abi_cap`, from `GJC_LANDLOCK_ABI`: a kernel without Landlock, or an older
/// one, can be tried on this one with `GJC_LANDLOCK_ABI=0`).
pub fn landlock_abi(cap: Option<u32>) -> u32 {
    static KERNEL: OnceLock<u32> = OnceLock::new();
    let kernel = *KERNEL.get_or_init(kernel_abi);
    cap.map_or(kernel, |cap| cap.min(kernel))
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the ABI, or 0 when the
/// kernel lacks Landlock (ENOSYS) or has it disabled (EOPNOTSUPP).
fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query; no pointer is read.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).unwrap_or(0)
}

/// Whether this build can load a seccomp program on this architecture.
pub fn seccomp_arch() -> Option<seccompiler::TargetArch> {
    if cfg!(target_arch = "x86_64") {
        Some(seccompiler::TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(seccompiler::TargetArch::aarch64)
    } else if cfg!(target_arch = "riscv64") {
        Some(seccompiler::TargetArch::riscv64)
    } else {
        None
    }
}

/// How network-off is enforced here, as `get_state` says it.
pub fn network_enforcement(abi: u32) -> &'static str {
    match (seccomp_arch().is_some(), abi >= NET_ABI) {
        (true, true) => "landlock+seccomp",
        (true, false) => "seccomp",
        (false, true) => "landlock",
        (false, false) => "none",
    }
}

/// A prepared confinement: what `enter` applies in a child.
#[derive(Debug)]
pub struct Confinement {
    ruleset: OwnedFd,
    filter: Option<Box<[seccompiler::sock_filter]>>,
    /// Where it lets commands write, and whether it lets them use the network (for the launcher,
    /// which builds the same confinement in another process).
    pub roots: Vec<PathBuf>,
    pub network: bool,
    /// The private temp dir commands get as `TMPDIR`, when they may write there.
    pub tmpdir: Option<PathBuf>,
}

/// The confinement as the child reads it: plain values and a pointer into the `Confinement`,
/// which the spawning thread keeps alive across the clone.
#[derive(Debug, Clone, Copy)]
pub struct RawConfinement {
    ruleset: RawFd,
    filter: libc::sock_fprog,
}

impl Confinement {
    /// Builds the ruleset for `roots` (empty: nothing writable) and, without `network`, the
    /// socket filter, with Landlock ABI `abi` (see [`landlock_abi`]). Fails, naming what is
    /// missing, when the kernel cannot enforce it.
    pub fn prepare(
        roots: &[PathBuf],
        network: bool,
        tmpdir: Option<PathBuf>,
        abi: u32,
    ) -> Result<Confinement, SandboxError> {
        if abi < MIN_FS_ABI {
            return Err(SandboxError::Unavailable(format!(
                "the kernel's Landlock ABI is {abi}; confining writes needs ABI {MIN_FS_ABI} (Linux 6.2) or newer"
            )));
        }
        let filter = if network {
            None
        } else {
            Some(socket_filter()?.into_boxed_slice())
        };
        let ruleset = ruleset(ABI::from(abi as i32), roots, !network && abi >= NET_ABI)?;
        Ok(Confinement {
            ruleset,
            filter,
            roots: roots.to_vec(),
            network,
            tmpdir,
        })
    }

    pub fn raw(&self) -> RawConfinement {
        let (len, filter) = match &self.filter {
            Some(program) => (program.len(), program.as_ptr()),
            None => (0, std::ptr::null()),
        };
        RawConfinement {
            ruleset: self.ruleset.as_raw_fd(),
            filter: libc::sock_fprog {
                len: len as libc::c_ushort,
                // The kernel only reads the program; seccompiler's instruction has the C layout.
                filter: filter.cast_mut().cast::<libc::sock_filter>(),
            },
        }
    }
}

fn ruleset(abi: ABI, roots: &[PathBuf], deny_tcp: bool) -> Result<OwnedFd, SandboxError> {
    let fail = |e: &dyn std::fmt::Display| {
        SandboxError::Unavailable(format!("the Landlock ruleset could not be built: {e}"))
    };
    let writes = AccessFs::from_all(abi) & !(AccessFs::from_read(abi) | AccessFs::IoctlDev);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(writes)
        .map_err(|e| fail(&e))?;
    if deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| fail(&e))?;
    }
    let mut created = ruleset.create().map_err(|e| fail(&e))?;
    for root in roots {
        let fd = PathFd::new(root)
            .map_err(|e| SandboxError::Root(format!("writable root {}: {e}", root.display())))?;
        created = created
            .add_rule(PathBeneath::new(fd, writes))
            .map_err(|e| fail(&e))?;
    }
    let device = AccessFs::WriteFile | AccessFs::Truncate;
    for path in DEVICES {
        // A device this system lacks needs no rule.
        if let Ok(fd) = PathFd::new(path) {
            created = created
                .add_rule(PathBeneath::new(fd, device & writes))
                .map_err(|e| fail(&e))?;
        }
    }
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| SandboxError::Unavailable("the kernel made no Landlock ruleset".into()))
}

/// `socket`/`socketpair` of a family other than `AF_UNIX`, and `io_uring_setup`, fail with EPERM.
fn socket_filter() -> Result<seccompiler::BpfProgram, SandboxError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    let arch = seccomp_arch().ok_or_else(|| {
        SandboxError::Unavailable("no seccomp filter for this architecture".into())
    })?;
    let fail = |e: &dyn std::fmt::Display| {
        SandboxError::Unavailable(format!("the seccomp filter could not be built: {e}"))
    };
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| fail(&e))?;
    let rule = SeccompRule::new(vec![not_unix]).map_err(|e| fail(&e))?;
    let rules = BTreeMap::from([
        (libc::SYS_socket, vec![rule.clone()]),
        (libc::SYS_socketpair, vec![rule]),
        (libc::SYS_io_uring_setup, vec![]),
    ]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| fail(&e))?;
    filter.try_into().map_err(|e| fail(&e))
}

/// Confines the calling process: no new privileges, the Landlock ruleset, the socket filter.
/// Returns the errno of the step that failed.
///
/// # Safety
/// Only in a child between clone and exec: makes raw system calls with values from `raw`, whose
/// filter pointer must still point at the `Confinement`'s program (the spawning thread keeps it).
/// Allocates nothing and takes no lock, so it is safe in a child sharing gjc's memory.
pub unsafe fn enter(raw: &RawConfinement) -> Result<(), libc::c_int> {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM)
    };
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
        return Err(errno());
    }
    if libc::syscall(libc::SYS_landlock_restrict_self, raw.ruleset, 0u32) != 0 {
        return Err(errno());
    }
    if !raw.filter.filter.is_null() {
        const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;
        // Without it the kernel also turns on the speculative-store-bypass mitigation for the
        // command, which slows all of its work; the filter is about sockets, not about code
        // sharing an address space with an attacker.
        const SECCOMP_FILTER_FLAG_SPEC_ALLOW: libc::c_uint = 1 << 2;
        let program: *const libc::sock_fprog = &raw.filter;
        let load = |flags: libc::c_uint| {
            libc::syscall(libc::SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, program) == 0
        };
        // A kernel older than 4.17 does not know the flag (EINVAL): load the filter without it.
        if !load(SECCOMP_FILTER_FLAG_SPEC_ALLOW) && (errno() != libc::EINVAL || !load(0)) {
            return Err(errno());
        }
    }
    Ok(())
}
