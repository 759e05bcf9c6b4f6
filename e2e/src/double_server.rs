//! The HTTP server piece shared by the API doubles (GitHub, GitLab, Gitea, Bitbucket,
//! Argo CD, Prometheus): an axum app bound to 127.0.0.1 on a free port and served on its
//! own thread and runtime, so that blocking git calls of a test cannot starve it, nor its
//! git calls the test. Stopped on drop. Also the [`Script`] of failures a test asks a double
//! for (a proxy's 502, a rate limit) and the log of requests it served. Test tooling only,
//! never shipped.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

/// What nginx in front of a forge answers while the forge is down.
pub(crate) const BAD_GATEWAY_PAGE: &str = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n";

/// The `502 Bad Gateway` page of the proxy in front of a forge.
pub(crate) fn bad_gateway() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        [("content-type", "text/html")],
        BAD_GATEWAY_PAGE,
    )
        .into_response()
}

/// The state of a forge double: its test world, its address, the token it requires, and
/// its own data behind a lock (never poisoned for good: a panicked handler's data stays
/// readable).
#[derive(Debug)]
pub(crate) struct DoubleState<I> {
    /// The world whose git it runs.
    pub(crate) world: crate::world::TestWorld,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base_url: String,
    /// The token every request must carry, when set.
    pub(crate) token: Option<String>,
    inner: std::sync::Mutex<I>,
}

impl<I> DoubleState<I> {
    /// The state of a double at `addr` in `world`.
    pub(crate) fn new(
        world: &crate::world::TestWorld,
        addr: SocketAddr,
        token: Option<&str>,
        inner: I,
    ) -> Self {
        DoubleState {
            world: world.clone(),
            base_url: format!("http://{addr}"),
            token: token.map(str::to_owned),
            inner: std::sync::Mutex::new(inner),
        }
    }

    /// Its data.
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, I> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `METHOD /path?query` of a request, as the doubles log it.
pub(crate) fn request_line(request: &Request) -> String {
    format!(
        "{} {}",
        request.method(),
        request
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
    )
}

/// What a scripted failure makes of the next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// The proxy in front answers `502` ([`bad_gateway`]).
    BadGateway,
    /// The forge rate-limits it.
    RateLimited,
}

/// The failures a test scripted for a double's next requests, and every request served.
#[derive(Debug, Default)]
pub(crate) struct Script {
    /// Every request, as `METHOD /path?query`, oldest first.
    pub(crate) requests: Vec<String>,
    /// How many of the next requests the proxy answers `502`.
    pub(crate) bad_gateway: u32,
    /// How many of the next requests are rate-limited.
    pub(crate) rate_limited: u32,
}

impl Script {
    /// Records `request`; what it runs into, if anything.
    pub(crate) fn record(&mut self, request: &Request) -> Option<Interrupt> {
        self.requests.push(request_line(request));
        if self.bad_gateway > 0 {
            self.bad_gateway -= 1;
            return Some(Interrupt::BadGateway);
        }
        if self.rate_limited > 0 {
            self.rate_limited -= 1;
            return Some(Interrupt::RateLimited);
        }
        None
    }
}

/// Binds a listener to `127.0.0.1:0` for the double called `name`.
pub(crate) fn bind(name: &str) -> Result<(std::net::TcpListener, SocketAddr)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .with_context(|| format!("Failed to bind the {name} to 127.0.0.1:0"))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// An axum app served on its own thread and runtime; stopped on drop.
#[derive(Debug)]
pub(crate) struct Server {
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `app` on `listener` (from [`bind`]); `name` names the thread and the errors.
    pub(crate) fn spawn(
        name: &str,
        listener: std::net::TcpListener,
        addr: SocketAddr,
        app: Router,
    ) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .with_context(|| format!("Failed to build the {name}'s runtime"))?;
        let (shutdown, stop) = oneshot::channel::<()>();
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => return eprintln!("{label} on {addr}: {err}"),
                    };
                    tokio::select! {
                        result = axum::serve(listener, app) => {
                            if let Err(err) = result {
                                eprintln!("{label} on {addr} failed: {err}");
                            }
                        }
                        _ = stop => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .with_context(|| format!("Failed to spawn the {name}'s thread"))?;
        Ok(Self {
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Stops serving and waits for the thread (at most the runtime's 2 s shutdown).
    pub(crate) fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
