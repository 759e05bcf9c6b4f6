//! The temporary world one test lives in.
//!
//! Owns the test's temporary directory, its `HOME` and free loopback ports. Each service
//! (`Registry`, `GitServer`, `Dray`, `GitRepo`) keeps a clone of the world, so the
//! directory outlives every process that writes into it and is removed after the last
//! one is stopped. Does not start services itself: see each service's `start`.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tempfile::TempDir;

/// Set to `1` to keep each world's directory after the test.
pub const KEEP_ENV: &str = "DRAY_E2E_KEEP";

/// A fresh temporary directory for one test; cheap to clone (shared handle).
#[derive(Clone, Debug)]
pub struct TestWorld {
    root: Arc<TempDir>,
}

impl TestWorld {
    /// Make a fresh world: a new temporary directory with an empty `home/`.
    ///
    /// With `DRAY_E2E_KEEP=1` the directory is kept after the test (its path is printed),
    /// to read logs and configs.
    pub fn new() -> Result<Self> {
        let mut root = tempfile::Builder::new()
            .prefix("dray-e2e-")
            .tempdir()
            .context("Failed to create the test's temporary directory")?;
        if std::env::var_os(KEEP_ENV).is_some_and(|v| v == "1") {
            root.disable_cleanup(true);
            eprintln!("{KEEP_ENV}=1: keeping `{}`", root.path().display());
        }
        let world = Self {
            root: Arc::new(root),
        };
        std::fs::create_dir_all(world.home()).context("Failed to create the test's `home/`")?;
        Ok(world)
    }

    /// The root of the world's temporary directory.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// The `HOME` given to every process the harness starts (no user config leaks in).
    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// A new, unique directory under the world whose name starts with `prefix`.
    pub fn unique_dir(&self, prefix: &str) -> Result<PathBuf> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir_in(self.path())
            .with_context(|| format!("Failed to create a `{prefix}` directory"))?;
        Ok(dir.keep())
    }
}

/// A free port on 127.0.0.1, found by binding port 0 and releasing it.
///
/// For child processes that must bind the port themselves; in-process servers keep
/// their listener instead.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("Failed to bind 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// How long one HTTP request of a test may take, connect to last body byte.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// An HTTP client for a test's own requests, bounded by [`HTTP_TIMEOUT`] (and 10 s to
/// connect), so a server that stops answering fails the test instead of hanging it.
/// Not for event streams, which stay open for as long as the server runs.
pub fn http_client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("Failed to build the test's HTTP client (reqwest's TLS backend did not start)")
}

/// Calls `check` every 100 ms until it finds something or `timeout` passes; the error names
/// `what` was awaited. For conditions another process makes true (a binding the API
/// server's authorizer has not seen yet, a Stage a controller has not moved yet).
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(found) = check()? {
            return Ok(found);
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!("waited {timeout:?} for {what} in vain");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The workspace root (`e2e/..`), where `examples/` and `target/` live.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}
