//! A TCP proxy in front of the API server, for cutting one client off from it: a Dray
//! replica whose kubeconfig points here reaches the API server while the proxy is open,
//! and nothing at all once it is [`cut`](ApiProxy::cut) (open connections are closed, new
//! ones are accepted and held without a byte either way, as a partition looks to a client
//! whose packets are dropped). [`heal`](ApiProxy::heal) lets new connections through again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::watch;

/// A proxy to one address on its own thread and runtime; stopped on drop.
#[derive(Debug)]
pub struct ApiProxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ApiProxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("Failed to bind the API proxy to 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("api-proxy-{}", addr.port()))
            .enable_all()
            .build()
            .context("Failed to build the API proxy's runtime")?;
        let state = (cut.clone(), generation.clone());
        let thread = std::thread::Builder::new()
            .name(format!("api-proxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        () = accept_loop(listener, target, state.0, state.1) => {}
                        _ = stop => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .context("Failed to spawn the API proxy's thread")?;
        Ok(ApiProxy {
            addr,
            cut,
            generation,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts every client off: open connections close, new ones hang.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Lets new connections through again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    target: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
) {
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        let cut = cut.clone();
        let mut changes = generation.subscribe();
        tokio::spawn(async move {
            if cut.load(Ordering::SeqCst) {
                // Held open, silent, until the proxy heals and is cut again or stops: a
                // client sees its own timeout, as behind a partition.
                let _ = changes.changed().await;
                return;
            }
            let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                return;
            };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                _ = changes.changed() => {}
            }
        });
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
