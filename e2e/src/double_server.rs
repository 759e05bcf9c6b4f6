//! The HTTP server piece shared by the API doubles (GitHub, GitLab, Argo CD, Prometheus):
//! an axum app bound to 127.0.0.1 on a free port and served on its own thread and runtime,
//! so that blocking git calls of a test cannot starve it, nor its git calls the test.
//! Stopped on drop. Test tooling only, never shipped.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use tokio::sync::oneshot;

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
