//! The CLI's saved contexts (as kubectl's kubeconfig contexts): a YAML file at
//! `$DRAY_CONFIG`, else `$XDG_CONFIG_HOME/dray/config.yaml`, else
//! `~/.config/dray/config.yaml`, written with mode 0600 since it holds tokens. Each context
//! names a server, a token and a project; one is current. `dray login` and `dray config`
//! write it; every client command reads it below its flags and environment.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::env;

/// What the file holds.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavedConfig {
    /// The context client commands use when `--context` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    /// The contexts, by name.
    #[serde(default)]
    pub contexts: Vec<SavedContext>,
}

/// One saved context.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavedContext {
    /// Its name (`dray config use-context NAME`).
    pub name: String,
    /// The server URL.
    pub server: String,
    /// The API token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

/// Why the saved contexts could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SavedConfigError {
    /// No place for the file.
    #[error(
        "cannot tell where the CLI's config file lives: none of DRAY_CONFIG, XDG_CONFIG_HOME and HOME is set; set DRAY_CONFIG to a file path"
    )]
    NoPlace,
    /// Reading failed.
    #[error("cannot read the CLI's config file `{path}`: {cause}; fix or remove it")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// Not the expected YAML.
    #[error(
        "the CLI's config file `{path}` is not valid: {cause}; fix it, or remove it and run `dray login` again"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// Writing failed.
    #[error(
        "cannot write the CLI's config file `{path}`: {cause}; set DRAY_CONFIG to a writable path"
    )]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
    /// A context name that is not in the file.
    #[error("there is no context `{name}` in `{path}`; {known}")]
    UnknownContext {
        /// The name asked for.
        name: String,
        /// The file.
        path: PathBuf,
        /// What exists, or how to make one.
        known: String,
    },
}

/// Where the file is, from the environment: `$DRAY_CONFIG`, else
/// `$XDG_CONFIG_HOME/dray/config.yaml`, else `$HOME/.config/dray/config.yaml`.
pub fn path() -> Result<PathBuf, SavedConfigError> {
    path_from(env::non_empty)
}

fn path_from(var: impl Fn(&str) -> Option<String>) -> Result<PathBuf, SavedConfigError> {
    if let Some(file) = var(env::DRAY_CONFIG) {
        return Ok(PathBuf::from(file));
    }
    if let Some(base) = var(env::XDG_CONFIG_HOME) {
        return Ok(Path::new(&base).join("dray").join("config.yaml"));
    }
    let home = var(env::HOME).ok_or(SavedConfigError::NoPlace)?;
    Ok(Path::new(&home)
        .join(".config")
        .join("dray")
        .join("config.yaml"))
}

impl SavedConfig {
    /// Reads `path`; a file that does not exist is an empty config.
    pub fn load(path: &Path) -> Result<Self, SavedConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(SavedConfigError::Read {
                    path: path.to_owned(),
                    cause: e.to_string(),
                });
            }
        };
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml_ng::from_str(&text).map_err(|e| SavedConfigError::Parse {
            path: path.to_owned(),
            cause: e.to_string(),
        })
    }

    /// Writes the config to `path` (its directory made if missing), readable by the owner
    /// only, replacing the old file in one rename.
    pub fn save(&self, path: &Path) -> Result<(), SavedConfigError> {
        let write_error = |cause: String| SavedConfigError::Write {
            path: path.to_owned(),
            cause,
        };
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| write_error(e.to_string()))?;
        let text = serde_yaml_ng::to_string(self).map_err(|e| write_error(e.to_string()))?;
        let staged = dir.join(format!(".dray-config.{}.tmp", std::process::id()));
        let written = write_owner_only(&staged, text.as_bytes())
            .and_then(|()| std::fs::rename(&staged, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&staged);
            return Err(write_error(e.to_string()));
        }
        Ok(())
    }

    /// The context `name`.
    pub fn context(&self, name: &str) -> Option<&SavedContext> {
        self.contexts.iter().find(|c| c.name == name)
    }

    /// The context `name`, or an error naming those that exist.
    pub fn require(&self, name: &str, path: &Path) -> Result<&SavedContext, SavedConfigError> {
        self.context(name)
            .ok_or_else(|| SavedConfigError::UnknownContext {
                name: name.to_owned(),
                path: path.to_owned(),
                known: self.known(),
            })
    }

    /// The current context, when one is set (and still exists).
    pub fn current(&self) -> Option<&SavedContext> {
        self.current_context
            .as_deref()
            .and_then(|name| self.context(name))
    }

    /// Adds `context`, or replaces the one of the same name.
    pub fn upsert(&mut self, context: SavedContext) {
        match self.contexts.iter_mut().find(|c| c.name == context.name) {
            Some(existing) => *existing = context,
            None => self.contexts.push(context),
        }
    }

    fn known(&self) -> String {
        if self.contexts.is_empty() {
            "make one with `dray login --server URL`".into()
        } else {
            let names: Vec<&str> = self.contexts.iter().map(|c| c.name.as_str()).collect();
            format!("the contexts are: {}", names.join(", "))
        }
    }
}

/// Writes `bytes` to a new file `path` that only its owner may read (mode 0600 from the
/// start, so the token is never readable by others, not even for a moment).
fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_dray_config_then_xdg_then_home() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let all = vars(&[
            ("DRAY_CONFIG", "/a/dray.yaml"),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(path_from(all).unwrap(), PathBuf::from("/a/dray.yaml"));
        let xdg = vars(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(
            path_from(xdg).unwrap(),
            PathBuf::from("/x/dray/config.yaml")
        );
        let home = vars(&[("HOME", "/h")]);
        assert_eq!(
            path_from(home).unwrap(),
            PathBuf::from("/h/.config/dray/config.yaml")
        );
        assert!(matches!(
            path_from(vars(&[])),
            Err(SavedConfigError::NoPlace)
        ));
    }

    #[test]
    fn saved_file_is_owner_only_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("config.yaml");
        assert_eq!(SavedConfig::load(&path).unwrap(), SavedConfig::default());
        let mut config = SavedConfig::default();
        config.upsert(SavedContext {
            name: "local".into(),
            server: "http://127.0.0.1:7070".into(),
            token: Some("t0k".into()),
            project: None,
        });
        config.current_context = Some("local".into());
        config.save(&path).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let back = SavedConfig::load(&path).unwrap();
        assert_eq!(back, config);
        assert_eq!(back.current().map(|c| c.name.as_str()), Some("local"));
    }

    #[test]
    fn a_broken_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "contexts: [1, 2").unwrap();
        let error = SavedConfig::load(&path).unwrap_err();
        assert!(error.to_string().contains("config.yaml"), "{error}");
        assert!(matches!(error, SavedConfigError::Parse { .. }));
    }
}
