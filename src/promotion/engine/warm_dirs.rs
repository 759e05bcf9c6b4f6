//! The Stages' warm directories outlive nothing: when a Stage is deleted its warm
//! directory (`<work root>/<project>/.warm/<stage>`, see [`super::run::WARM_DIR`]) goes
//! with it, worktree registrations included, and at start (and whenever the caches were
//! listed again) every warm directory whose Stage the caches do not hold is removed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::Engine;
use super::run::WARM_DIR;
use crate::api::{Kind, ObjectKey};
use crate::runtime::Cache;
use crate::runtime::reflector::Event;

impl Engine {
    /// `<work root>/<project>/.warm/<stage>` (no Promotion's name starts with `.`).
    pub(super) fn stage_warm_dir(&self, project: &str, stage: &str) -> PathBuf {
        self.work_root.join(project).join(WARM_DIR).join(stage)
    }

    /// Removes the warm directories of deleted Stages until `shutdown`.
    pub async fn tend_warm_dirs(self, cache: Cache, shutdown: CancellationToken) {
        let mut events = cache.subscribe();
        self.sweep_warm_dirs(&cache).await;
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = events.recv() => event,
            };
            match event {
                Ok(event) => match event.as_ref() {
                    Event::Changed(changed)
                        if changed.kind() == Kind::Stage && changed.object.is_none() =>
                    {
                        self.remove_stage_warm_dir(&changed.change.key).await;
                    }
                    Event::Changed(_) => {}
                    Event::Relisted => self.sweep_warm_dirs(&cache).await,
                },
                Err(RecvError::Lagged(_)) => self.sweep_warm_dirs(&cache).await,
                Err(RecvError::Closed) => return,
            }
        }
    }

    async fn remove_stage_warm_dir(&self, stage: &ObjectKey) {
        let Some(project) = stage.namespace.as_deref() else {
            return;
        };
        let dir = self.stage_warm_dir(project, &stage.name);
        if tokio::fs::metadata(&dir).await.is_ok() {
            dray_steps::remove_warm_dir(&self.tools.git, &dir).await;
            tracing::debug!(%stage, dir = %dir.display(), "the deleted Stage's warm worktrees are removed");
        }
    }

    /// Removes every warm directory whose Stage the caches do not hold.
    async fn sweep_warm_dirs(&self, cache: &Cache) {
        let stages: HashSet<(String, String)> = cache
            .keys(Kind::Stage)
            .into_iter()
            .filter_map(|key| Some((key.namespace?, key.name)))
            .collect();
        for (project, stage) in warm_dirs(&self.work_root).await {
            if !stages.contains(&(project.clone(), stage.clone())) {
                self.remove_stage_warm_dir(&ObjectKey::namespaced(Kind::Stage, &project, &stage))
                    .await;
            }
        }
    }
}

/// Every `(project, stage)` with a warm directory under `work_root`.
async fn warm_dirs(work_root: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for project in subdirectories(work_root).await {
        let warm = work_root.join(&project).join(WARM_DIR);
        for stage in subdirectories(&warm).await {
            found.push((project.clone(), stage));
        }
    }
    found
}

/// The names of the directories in `dir` (none when it cannot be read).
async fn subdirectories(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return names;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let is_dir = entry.file_type().await.is_ok_and(|t| t.is_dir());
        if let (true, Ok(name)) = (is_dir, entry.file_name().into_string()) {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warm_dirs_are_found_by_project_and_stage_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        for dir in [
            "demo/.warm/dev",
            "demo/.warm/prod",
            "demo/p-1/src",
            "other/.warm/qa",
            ".previews/x",
        ] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        std::fs::write(root.path().join("demo/.warm/stray-file"), "").unwrap();
        let mut found = warm_dirs(root.path()).await;
        found.sort();
        let want: Vec<(String, String)> = [("demo", "dev"), ("demo", "prod"), ("other", "qa")]
            .iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect();
        assert_eq!(found, want);
    }
}
