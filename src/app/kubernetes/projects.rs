//! The Project namespaces: every Project's namespace exists and carries
//! `dray.dev/project`, so that `kubectl apply` of the Project's resources finds it and the
//! store's default selection reads them. A reconciler on the runtime, like the others.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api::Project;
use crate::runtime::{Action, Cache, Controller, Resource as _};
use crate::store::StoreError;
use crate::store::kubernetes::KubeStore;

/// How soon a namespace that could not be made is tried again.
const RETRY: Duration = Duration::from_secs(15);

/// Runs until `shutdown`.
pub(super) async fn run(store: Arc<KubeStore>, cache: Cache, shutdown: CancellationToken) {
    Controller::<Project>::for_kind("project-namespaces", &cache)
        .run(
            reconcile,
            |project: Arc<Project>, error: &StoreError, _| {
                tracing::warn!(project = %project.name(), %error, "cannot make the project's namespace; trying again");
                Action::requeue(RETRY)
            },
            store,
            shutdown,
        )
        .await;
}

async fn reconcile(project: Arc<Project>, store: Arc<KubeStore>) -> Result<Action, StoreError> {
    store.ensure_project_namespace(project.name()).await?;
    Ok(Action::await_change())
}
