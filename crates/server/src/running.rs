//! The server started inside another program (the desktop app's "Let other apps on this
//! computer use Hearth"): on a thread of its own, on 127.0.0.1 only, at the port a setting names
//! or, when another program holds that one, at a free port (and the caller is told), until it is
//! stopped.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::pin::pin;
use std::thread::JoinHandle;

use futures_util::future::{self, Either};
use tokio::sync::oneshot;

use crate::error::Error;
use crate::state::AppState;

/// A server running on its own thread; [`RunningServer::stop`] (or dropping it) stops it and
/// frees its port.
pub struct RunningServer {
    address: SocketAddr,
    wanted_port: u16,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Starts serving `state` on 127.0.0.1 at `port` (0: any free port). When another program
/// already listens there, serves at a free port instead: [`RunningServer::fell_back`] says so.
/// Fails when the settings are out of range or no port can be had.
pub fn start(state: AppState, port: u16) -> Result<RunningServer, Error> {
    state.options().validate()?;
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::info!("port {port} is taken; serving at a free port instead");
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        }
        bound => bound?,
    };
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("hearth-server".to_owned())
        .spawn(move || {
            let served = runtime.block_on(async {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                // Stopping drops the serving future, and with it the listener: the port is free
                // once `stop` returns.
                match future::select(pin!(crate::serve(listener, state)), stopped).await {
                    Either::Left((served, _)) => served,
                    Either::Right(_) => Ok(()),
                }
            });
            if let Err(e) = served {
                tracing::error!("the server stopped: {e}");
            }
            // Dropping the runtime cancels the open connections; an answer being written
            // stops at its next token (its client is gone) and releases the model.
            drop(runtime);
        })?;
    tracing::info!(%address, "serving other apps on this computer");
    Ok(RunningServer {
        address,
        wanted_port: port,
        stop: Some(stop),
        thread: Some(thread),
    })
}

impl RunningServer {
    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The address other programs call, e.g. `http://127.0.0.1:11434`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The port that was asked for.
    pub fn wanted_port(&self) -> u16 {
        self.wanted_port
    }

    /// Whether it listens at another port than the one asked for (that one was taken).
    pub fn fell_back(&self) -> bool {
        self.wanted_port != 0 && self.address.port() != self.wanted_port
    }

    /// Stops serving and waits until the port is free and no answer holds the model.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the server's thread panicked");
            }
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shut_down();
    }
}
