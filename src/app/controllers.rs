//! Starts the controllers of every layer on one set of runtime caches: discovery's
//! Warehouse controller, the pipeline's auto-promotion and promotion queue, the engine's
//! Stage truth and verification, and the notifier. Each is a reconciler on `crate::runtime`; the caches are
//! listed once and kept current from the store's change feed.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::discovery::controller::WarehouseController;
use crate::discovery::git::{GitDiscoverer, MirrorCache};
use crate::discovery::image::ImageDiscoverer;
use crate::notify::Notifier;
use crate::pipeline::auto::AutoPromoter;
use crate::pipeline::queue::PromotionController;
use crate::promotion::{Engine, EngineParts, SharedMirrors, StageTruth};
use crate::runtime::{Cache, Kinds, reflector};
use crate::secrets::SecretKey;
use crate::store::Store;
use crate::verification::VerificationController;

/// What the controllers run on.
pub(super) struct Parts {
    pub(super) store: Arc<dyn Store>,
    pub(super) secret_key: Arc<SecretKey>,
    pub(super) images: ImageDiscoverer,
    pub(super) mirrors: Arc<MirrorCache>,
    pub(super) tools: dray_steps::ToolPaths,
    /// Where promotions get their work directories.
    pub(super) work_root: PathBuf,
    /// Dray's external URL, for links in notifications and commit statuses.
    pub(super) public_url: String,
}

/// Lists the caches and starts every controller; the handle ends once all stopped after
/// `shutdown` (running promotions cancelled, to resume on the next start). The caches are
/// returned for controllers only one deployment runs (Kubernetes' project namespaces).
pub(super) async fn start(
    parts: Parts,
    shutdown: CancellationToken,
) -> anyhow::Result<(JoinHandle<()>, Cache)> {
    let Parts {
        store,
        secret_key,
        images,
        mirrors,
        tools,
        work_root,
        public_url,
    } = parts;
    let cache = reflector::start(store.clone(), Kinds::all(), shutdown.clone())
        .await
        .context("cannot read the store to start the controllers")?;
    let warehouses = WarehouseController::new(
        store.clone(),
        secret_key.clone(),
        images,
        GitDiscoverer::new(mirrors.clone()),
    );
    let engine = Engine::new(EngineParts {
        store: store.clone(),
        steps: dray_steps::builtin_steps(),
        work_root,
        repos: Arc::new(SharedMirrors(mirrors.clone())),
        secret_key: secret_key.clone(),
        tools,
    })?;
    let notifier = Notifier::new(store.clone(), secret_key.clone(), &public_url)
        .context("cannot set up the HTTP client notifications use")?;
    let truth = StageTruth::new(store.clone(), mirrors, secret_key.clone());
    let verification = VerificationController::new(store, secret_key)
        .context("cannot set up the HTTP client verification uses")?;
    let auto = AutoPromoter::new(cache.clone());
    let warm_dirs = engine.clone();
    let caches = cache.clone();
    let handle = tokio::spawn(async move {
        tokio::join!(
            warehouses.run(cache.clone(), shutdown.clone()),
            auto.run(shutdown.clone()),
            truth.run(cache.clone(), shutdown.clone()),
            verification.run(cache.clone(), shutdown.clone()),
            notifier.run(cache.clone(), shutdown.clone()),
            warm_dirs.tend_warm_dirs(cache.clone(), shutdown.clone()),
            PromotionController::new(engine).run(cache, shutdown)
        );
    });
    Ok((handle, caches))
}
