//! The project a session works in: its folder, and what gjc loads from that folder (context files
//! and skills in the system prompt, rule files, hooks) and where its session files go. gjc starts
//! in `--cwd`; `new_session {cwd}` and `switch_session {cwd}` move the session to another folder,
//! and everything project-scoped is loaded again for it. The session owns what it loads. What
//! runs programs (hooks) loads only for a trusted project (`crate::trust`, `trust_project`).

use std::path::{Path, PathBuf};

use super::SessionLoop;
use crate::prompt::{self, PromptOptions};
use crate::protocol::reply::ProjectTrust;
use crate::provider::ToolSpec;
use crate::rules::RuleSet;
use crate::trust::TrustStore;

/// What the start-up flags say about loading a project; kept so another folder is loaded the
/// same way as the first.
#[derive(Debug, Clone, Default)]
pub struct ProjectOptions {
    pub agent_dir: PathBuf,
    /// `--system-prompt`: replaces the built-in prompt.
    pub replace: Option<String>,
    /// `--append-system-prompt`.
    pub append: Option<String>,
    /// Context files and rule files (`--no-rules` turns both off).
    pub rules: bool,
    pub skills: bool,
    /// `--session-dir`: every session file goes there, whatever the folder.
    pub fixed_session_dir: Option<PathBuf>,
    /// Todo reminders per run (`Settings::todo_reminders` at start), this session's own.
    pub todo_reminders: u32,
    /// `Settings::home`: a cwd under it names its session folder relative to it.
    pub home: Option<PathBuf>,
}

/// What a project contributes to the session.
pub struct Loaded {
    pub system_prompt: String,
    pub rules: RuleSet,
}

impl ProjectOptions {
    /// Reads the project-scoped context of `cwd` (rule warnings go to the log).
    pub fn load(&self, cwd: &Path, tools: &[ToolSpec]) -> Loaded {
        let rules = if self.rules {
            let (rules, warnings) = RuleSet::load(&self.agent_dir, cwd);
            warnings.iter().for_each(|w| log::warn!("{w}"));
            rules
        } else {
            RuleSet::default()
        };
        let system_prompt = prompt::build(&PromptOptions {
            cwd,
            agent_dir: &self.agent_dir,
            tools,
            replace: self.replace.as_deref(),
            append: self.append.as_deref(),
            rules: self.rules,
            rule_set: &rules,
            skills: self.skills,
        });
        Loaded {
            system_prompt,
            rules,
        }
    }

    /// Where the session files of `cwd` go.
    pub fn session_dir(&self, sessions_root: &Path, cwd: &Path) -> PathBuf {
        match &self.fixed_session_dir {
            Some(dir) => dir.clone(),
            None => super::store::cwd_dir(sessions_root, cwd, self.home.as_deref()),
        }
    }
}

/// Why a folder cannot be a session's working folder.
#[derive(Debug)]
pub enum CwdError {
    Relative(PathBuf),
    /// It does not exist or cannot be resolved.
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
    NotDir(PathBuf),
}

impl std::fmt::Display for CwdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CwdError::Relative(p) => {
                write!(f, "cwd must be an absolute path, not {}", p.display())
            }
            CwdError::Resolve { path, source } => write!(f, "cwd {}: {source}", path.display()),
            CwdError::NotDir(p) => write!(f, "cwd {} is not a directory", p.display()),
        }
    }
}

impl std::error::Error for CwdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CwdError::Resolve { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A folder a session may work in: absolute, existing, a directory. Returned canonical (symlinks
/// resolved), as session headers and session folder names use it.
pub fn resolve_cwd(raw: &Path) -> Result<PathBuf, CwdError> {
    if !raw.is_absolute() {
        return Err(CwdError::Relative(raw.to_path_buf()));
    }
    let cwd = std::fs::canonicalize(raw).map_err(|source| CwdError::Resolve {
        path: raw.to_path_buf(),
        source,
    })?;
    if !cwd.is_dir() {
        return Err(CwdError::NotDir(raw.to_path_buf()));
    }
    Ok(cwd)
}

impl SessionLoop {
    /// `trust_project`: remembers whether the folder `cwd` (by default the session's project)
    /// may run programs through its own files. For the session's project the hooks are loaded
    /// again at once when that changes what may load: trusted, its `.gjc/hooks.json` takes
    /// effect for the events that follow; revoked, its hooks are dropped.
    pub(super) fn trust_project(
        &mut self,
        cwd: Option<&str>,
        trusted: bool,
    ) -> Result<ProjectTrust, String> {
        let cwd = match cwd {
            Some(raw) => resolve_cwd(Path::new(raw)).map_err(|e| e.to_string())?,
            None => self.state.cwd.clone(),
        };
        TrustStore::new(&self.state.project.agent_dir)
            .remember(&cwd, trusted)
            .map_err(|e| e.to_string())?;
        if cwd == self.state.cwd && trusted != self.state.project_trusted {
            self.reload_hooks();
        }
        Ok(ProjectTrust {
            cwd: cwd.display().to_string(),
            trusted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_existing_folders_are_projects() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = resolve_cwd(Path::new("relative/dir")).unwrap_err();
        assert!(matches!(e, CwdError::Relative(_)), "{e:?}");
        assert!(e.to_string().contains("absolute"));
        let e = resolve_cwd(&tmp.path().join("missing")).unwrap_err();
        assert!(
            matches!(&e, CwdError::Resolve { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        let e = resolve_cwd(&file).unwrap_err();
        assert!(matches!(&e, CwdError::NotDir(p) if p == &file), "{e:?}");
        assert!(e.to_string().contains("not a directory"));
        assert_eq!(
            resolve_cwd(tmp.path()).unwrap(),
            tmp.path().canonicalize().unwrap()
        );
    }

    #[test]
    fn a_project_brings_its_context_files_and_session_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        for d in [&agent, &a, &b] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(b.join("AGENTS.md"), "Project B conventions").unwrap();
        let options = ProjectOptions {
            agent_dir: agent,
            rules: true,
            ..ProjectOptions::default()
        };
        assert!(!options
            .load(&a, &[])
            .system_prompt
            .contains("Project B conventions"));
        let loaded = options.load(&b, &[]);
        assert!(loaded.system_prompt.contains("Project B conventions"));
        assert!(loaded
            .system_prompt
            .contains(&format!("Current working directory: {}", b.display())));
        let root = Path::new("/r");
        assert_eq!(
            options.session_dir(root, Path::new("/srv/b")),
            PathBuf::from("/r/--srv-b--")
        );
        let fixed = ProjectOptions {
            fixed_session_dir: Some("/fixed".into()),
            ..options
        };
        assert_eq!(
            fixed.session_dir(root, Path::new("/srv/b")),
            PathBuf::from("/fixed")
        );
    }
}
