//! Tests of `beneath.rs`: every way out is refused with nothing written outside, and writes
//! inside still work.

use super::*;
use std::io::Write as _;
use std::os::unix::fs::symlink;

/// A workspace and a folder outside it holding a file that must never change.
struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, out) = (base.join("ws"), base.join("out"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("secret"), "untouched").unwrap();
        Fixture { _dir: dir, ws, out }
    }

    fn roots(&self) -> Vec<PathBuf> {
        vec![self.ws.clone()]
    }

    fn write(&self, path: &Path) -> Result<(), BeneathError> {
        let t = target(&self.roots(), path, true)?;
        let old = t.metadata()?;
        t.replace(b"written", old.as_ref())
    }

    /// The outside folder holds exactly what it held.
    fn outside_unchanged(&self) {
        assert_eq!(
            std::fs::read_to_string(self.out.join("secret")).unwrap(),
            "untouched"
        );
        let names: Vec<_> = std::fs::read_dir(&self.out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [OsString::from("secret")], "nothing new outside");
    }
}

#[test]
fn writes_inside_create_parents_and_replace_atomically() {
    let f = Fixture::new();
    f.write(&f.ws.join("a/b/c.txt")).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("a/b/c.txt")).unwrap(),
        "written"
    );
    // `..` that stays inside is fine once normalised.
    f.write(&f.ws.join("a/b/../d.txt")).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("a/d.txt")).unwrap(),
        "written"
    );
    assert_eq!(
        std::fs::read_dir(f.ws.join("a/b")).unwrap().count(),
        1,
        "no temporary left"
    );
    let mut file = open_for_write(&f.roots(), &f.ws.join("e/f.txt"), true).unwrap();
    file.write_all(b"in place").unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("e/f.txt")).unwrap(),
        "in place"
    );
    create_dir_all_beneath(&f.roots(), &f.ws.join("g/h")).unwrap();
    assert!(f.ws.join("g/h").is_dir());
}

#[test]
fn a_second_root_is_writable_and_the_longest_root_wins() {
    let f = Fixture::new();
    let tmp = f.ws.parent().unwrap().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let roots = vec![f.ws.clone(), tmp.clone()];
    target(&roots, &tmp.join("x"), true)
        .unwrap()
        .replace(b"t", None)
        .unwrap();
    assert_eq!(std::fs::read_to_string(tmp.join("x")).unwrap(), "t");
    // A root the host named through a link is opened as named; under the shorter root the
    // same path would leave through the link.
    symlink(&tmp, f.ws.join("linked")).unwrap();
    let nested = vec![f.ws.clone(), f.ws.join("linked")];
    target(&nested, &f.ws.join("linked/y"), true)
        .unwrap()
        .replace(b"y", None)
        .unwrap();
    assert_eq!(std::fs::read_to_string(tmp.join("y")).unwrap(), "y");
    assert!(matches!(
        f.write(&f.ws.join("linked/z")),
        Err(BeneathError::Escapes { .. })
    ));
    assert!(!tmp.join("z").exists());
}

#[test]
fn dot_dot_absolute_and_proc_root_paths_are_outside() {
    let f = Fixture::new();
    for path in [
        f.ws.join("../out/secret"),
        f.ws.join("a/../../out/new"),
        f.out.join("secret"),
        PathBuf::from("/proc/self/root")
            .join(f.out.strip_prefix("/").unwrap())
            .join("secret"),
    ] {
        let err = f
            .write(&path)
            .err()
            .unwrap_or_else(|| panic!("{} was written", path.display()));
        assert!(
            matches!(err, BeneathError::Outside { .. }),
            "{path:?}: {err}"
        );
        assert!(
            err.to_string().contains(&f.ws.display().to_string()),
            "{err}"
        );
    }
    f.outside_unchanged();
}

#[test]
fn symlinks_pointing_out_are_refused_absolute_or_relative() {
    let f = Fixture::new();
    symlink(f.out.join("secret"), f.ws.join("abs")).unwrap();
    symlink("../out/secret", f.ws.join("rel")).unwrap();
    symlink("../out/fresh", f.ws.join("dangling")).unwrap();
    std::fs::create_dir(f.ws.join("d")).unwrap();
    symlink("../../out/secret", f.ws.join("d/deep")).unwrap();
    for name in ["abs", "rel", "dangling", "d/deep"] {
        let err = f
            .write(&f.ws.join(name))
            .err()
            .unwrap_or_else(|| panic!("{name} was written"));
        assert!(matches!(err, BeneathError::Escapes { .. }), "{name}: {err}");
        assert!(matches!(
            open_for_write(&f.roots(), &f.ws.join(name), true),
            Err(BeneathError::Escapes { .. })
        ));
    }
    f.outside_unchanged();
}

#[test]
fn a_symlinked_parent_folder_is_refused() {
    let f = Fixture::new();
    symlink(&f.out, f.ws.join("dir")).unwrap();
    symlink("../out", f.ws.join("reldir")).unwrap();
    for path in ["dir/secret", "dir/new", "dir/sub/new", "reldir/new"] {
        let err = f
            .write(&f.ws.join(path))
            .err()
            .unwrap_or_else(|| panic!("{path} was written"));
        assert!(matches!(err, BeneathError::Escapes { .. }), "{path}: {err}");
    }
    assert!(create_dir_all_beneath(&f.roots(), &f.ws.join("dir/sub")).is_err());
    f.outside_unchanged();
}

#[test]
fn a_magic_link_is_refused() {
    let f = Fixture::new();
    // A root that holds /proc links: the kernel, not a spelling check, refuses them.
    let roots = vec![PathBuf::from("/proc/self")];
    let path = PathBuf::from("/proc/self/root")
        .join(f.out.strip_prefix("/").unwrap())
        .join("new");
    assert!(target(&roots, &path, false).is_err());
    assert!(matches!(
        delegable(&roots, &path),
        Err(BeneathError::Io(_) | BeneathError::Escapes { .. })
    ));
    f.outside_unchanged();
}

#[test]
fn links_inside_are_followed_and_stay() {
    let f = Fixture::new();
    std::fs::create_dir(f.ws.join("real")).unwrap();
    std::fs::write(f.ws.join("real/file"), "old").unwrap();
    symlink("real/file", f.ws.join("rel")).unwrap();
    symlink(f.ws.join("real/file"), f.ws.join("abs")).unwrap();
    symlink("real", f.ws.join("dirlink")).unwrap();
    for name in ["rel", "abs", "dirlink/file"] {
        std::fs::write(f.ws.join("real/file"), "old").unwrap();
        f.write(&f.ws.join(name)).unwrap();
        assert_eq!(
            std::fs::read_to_string(f.ws.join("real/file")).unwrap(),
            "written",
            "{name}"
        );
    }
    assert!(std::fs::symlink_metadata(f.ws.join("rel"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_hard_link_to_an_outside_file_is_never_written_through() {
    let f = Fixture::new();
    std::fs::hard_link(f.out.join("secret"), f.ws.join("hard")).unwrap();
    let err = open_for_write(&f.roots(), &f.ws.join("hard"), false).unwrap_err();
    assert!(err.to_string().contains("hard links"), "{err}");
    // The atomic replace gives the name a new file and leaves the other name's alone.
    f.write(&f.ws.join("hard")).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("hard")).unwrap(),
        "written"
    );
    f.outside_unchanged();
}

#[test]
fn no_roots_means_nothing_is_writable() {
    let f = Fixture::new();
    let err = target(&[], &f.ws.join("x"), true).err().unwrap();
    assert!(err.to_string().contains("nothing is writable"), "{err}");
    assert!(!f.ws.join("x").exists());
}

#[test]
fn delegable_paths_are_normalised_and_stay_inside() {
    let f = Fixture::new();
    let roots = f.roots();
    assert_eq!(
        delegable(&roots, &f.ws.join("a/../b/./c")).unwrap(),
        f.ws.join("b/c")
    );
    assert!(matches!(
        delegable(&roots, &f.ws.join("../../etc/passwd")),
        Err(BeneathError::Outside { .. })
    ));
    symlink(&f.out, f.ws.join("link")).unwrap();
    symlink("../out/nothing", f.ws.join("dangling")).unwrap();
    for path in ["link/secret", "link/new/deeper", "dangling", "dangling/x"] {
        assert!(
            matches!(
                delegable(&roots, &f.ws.join(path)),
                Err(BeneathError::Escapes { .. })
            ),
            "{path}"
        );
    }
    std::fs::create_dir(f.ws.join("in")).unwrap();
    symlink("in", f.ws.join("inlink")).unwrap();
    assert_eq!(
        delegable(&roots, &f.ws.join("inlink/new")).unwrap(),
        f.ws.join("inlink/new")
    );
}

#[test]
fn normalize_drops_dots_and_never_climbs_above_root() {
    assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    assert_eq!(normalize(Path::new("/../../x")), PathBuf::from("/x"));
    assert_eq!(normalize(Path::new("/a//b/")), PathBuf::from("/a/b"));
}
