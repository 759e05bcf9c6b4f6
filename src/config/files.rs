//! Finding and reading configuration files: files as given, directories recursively
//! (`*.yaml` and `*.yml`, hidden entries skipped, sorted so that loading is deterministic).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::SourceFile;
use super::error::{ConfigError, ConfigErrors};

/// Reads `paths` in order; a directory contributes its YAML files in sorted order.
/// Reports every unreadable path, not just the first.
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<SourceFile>, ConfigErrors> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        match fs::metadata(path) {
            Err(e) => errors.push(
                ConfigError::file(&shown, format!("cannot read `{shown}`: {e}"))
                    .with_hint("check the path; give files or directories of YAML manifests"),
            ),
            Ok(meta) if meta.is_dir() => {
                let mut found = Vec::new();
                let mut seen = BTreeSet::new();
                let before = errors.len();
                collect(path, &mut found, &mut seen, &mut errors);
                if found.is_empty() && errors.len() == before {
                    errors.push(
                        ConfigError::file(
                            &shown,
                            format!("no `*.yaml` or `*.yml` files in `{shown}`"),
                        )
                        .with_hint(
                            "give a directory that holds YAML manifests, or the files themselves",
                        ),
                    );
                }
                for file in found {
                    read(&file, &mut files, &mut errors);
                }
            }
            Ok(_) => read(path, &mut files, &mut errors),
        }
    }
    if errors.is_empty() {
        Ok(files)
    } else {
        Err(ConfigErrors(errors))
    }
}

fn read(path: &Path, files: &mut Vec<SourceFile>, errors: &mut Vec<ConfigError>) {
    let shown = path.display().to_string();
    match fs::read_to_string(path) {
        Ok(content) => files.push(SourceFile {
            path: shown,
            content,
        }),
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::InvalidData {
                "save the file as UTF-8"
            } else {
                "check that the file exists and is readable"
            };
            errors.push(
                ConfigError::file(&shown, format!("cannot read `{shown}`: {e}")).with_hint(hint),
            );
        }
    }
}

fn unreadable_dir(shown: &str, e: &std::io::Error) -> ConfigError {
    ConfigError::file(shown, format!("cannot read directory `{shown}`: {e}"))
        .with_hint("check that the directory exists and may be listed by this user")
}

/// Collects YAML files below `dir`, sorted, following symbolic links but never into a
/// directory twice.
fn collect(
    dir: &Path,
    found: &mut Vec<PathBuf>,
    seen: &mut BTreeSet<PathBuf>,
    errors: &mut Vec<ConfigError>,
) {
    let shown = dir.display().to_string();
    if let Ok(real) = fs::canonicalize(dir) {
        if !seen.insert(real) {
            return;
        }
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            errors.push(unreadable_dir(&shown, &e));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => paths.push(entry.path()),
            Err(e) => errors.push(unreadable_dir(&shown, &e)),
        }
    }
    paths.sort();
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect(&path, found, seen, errors);
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            found.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_directories_recursively_in_sorted_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("b/nested")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("z.yaml"), "z: 1").unwrap();
        fs::write(root.join("a.yml"), "a: 1").unwrap();
        fs::write(root.join("notes.txt"), "no").unwrap();
        fs::write(root.join("b/nested/c.yaml"), "c: 1").unwrap();
        fs::write(root.join(".git/x.yaml"), "hidden").unwrap();
        let files = read_paths(&[root.to_path_buf()]).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| {
                Path::new(&f.path)
                    .strip_prefix(root)
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(names, vec!["a.yml", "b/nested/c.yaml", "z.yaml"]);
        assert_eq!(files[0].content, "a: 1");
    }

    #[test]
    fn names_every_missing_path_with_the_os_cause() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("given.txt");
        fs::write(&file, "kind: Project").unwrap();
        let missing = dir.path().join("missing.yaml");
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let errors = read_paths(&[file, missing.clone(), empty]).unwrap_err();
        assert_eq!(errors.0.len(), 2);
        assert_eq!(errors.0[0].file, missing.display().to_string());
        assert!(
            errors.0[0].message.contains("No such file or directory"),
            "{}",
            errors.0[0].message
        );
        assert!(errors.0[1].message.starts_with("no `*.yaml`"));
    }
}
