//! Start-up: the sockets (bound, inherited or taken over), the switch to
//! `service.user`, the pidfile, the pooler and its tasks.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{Running, ServiceOpts};
use crate::config::Config;
use crate::listener::{Handover, Listeners};
use crate::pooler::Pooler;
use crate::service::activation::Inherited;
use crate::service::logfile::{self, LogFile};
use crate::service::pidfile::{self, Pidfile};
use crate::service::{limits, privileges};
use crate::takeover::{self, ControlSocket, Taken};

/// A takeover under way: the conversation, and the received sockets no
/// client listener claimed (the metrics endpoint's, or ones to close).
type Received = (Taken, Inherited);

/// Starts serving `config`; the pidfile, if any, lives as long as the value.
pub(super) async fn start(
    config: Config,
    service: &ServiceOpts,
) -> Result<(Running, Option<Pidfile>), String> {
    // A takeover's pidfile names the process it takes over from until then.
    if let (Some(p), false) = (&service.pidfile, service.takeover) {
        pidfile::check(p).map_err(|e| e.to_string())?;
    }
    let (listeners, mut taken) = bind_listeners(&config, service.takeover).await?;
    let control = ControlSocket::bind(&config).map_err(|e| e.to_string())?;
    let mut handover = listeners.handover().map_err(|e| e.to_string())?;
    let metrics_listener = bind_metrics(&config, taken.as_mut(), &mut handover).await?;
    let taken = taken.map(|(t, left)| {
        for unused in left.close_unused() {
            tracing::info!(socket = %unused, "takeover: no longer configured; closing");
        }
        t
    });
    let control_file = control.as_ref().map(|c| c.bound_path().to_path_buf());
    drop_privileges(
        &config,
        service.user.as_deref(),
        &listeners,
        control_file.as_deref(),
    )?;
    let mut pidfile = match &service.pidfile {
        Some(p) if !service.takeover => Some(Pidfile::create(p).map_err(|e| e.to_string())?),
        _ => None,
    };
    limits::warn_if_low(&config);
    let pooler = Pooler::new(config).await.map_err(|e| e.to_string())?;
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    let metrics = metrics_listener.map(|l| {
        tokio::spawn(crate::admin::metrics::serve_on(
            l,
            pooler.clone(),
            metrics_stop.clone(),
        ))
    });
    let accept = tokio::spawn(crate::client::accept(listeners, pooler.clone()));
    if let Some(taken) = taken {
        // Written before the old process hears it may stop: it removes the
        // file on exit unless the file already names this process, and a
        // write after it had read its own id would be unlinked with it.
        if let Some(p) = &service.pidfile {
            pidfile = Some(Pidfile::take_over(p).map_err(|e| e.to_string())?);
        }
        confirm_takeover(taken, &pooler).await;
    }
    let (requests, taking_over) = mpsc::channel(1);
    let cancels = cancels_from_successor(&pooler);
    let control = control.and_then(|mut c| match c.place() {
        Ok(()) => Some(tokio::spawn(c.serve(handover, requests, cancels))),
        Err(e) => {
            tracing::warn!(error = %e, "no takeover control socket; --takeover cannot reach this process");
            None
        }
    });
    let running = Running {
        pooler,
        accept,
        metrics,
        metrics_stop,
        control,
        taking_over,
    };
    Ok((running, pidfile))
}

/// The listening sockets: bound (or inherited from a service manager), or
/// taken over from the running process.
async fn bind_listeners(
    config: &Config,
    takeover: bool,
) -> Result<(Listeners, Option<Received>), String> {
    if !takeover {
        let mut inherited = Inherited::from_env().map_err(|e| e.to_string())?;
        let listeners = Listeners::bind_with(config, &mut inherited)
            .await
            .map_err(|e| e.to_string())?;
        inherited.finish().map_err(|e| e.to_string())?;
        return Ok((listeners, None));
    }
    let mut taken = takeover::take(config)
        .await
        .map_err(|e| format!("--takeover: {e}"))?;
    let mut inherited = std::mem::take(&mut taken.inherited);
    let mut listeners = Listeners::bind_with(config, &mut inherited)
        .await
        .map_err(|e| format!("--takeover: {e}"))?;
    listeners.adopt_socket_file();
    Ok((listeners, Some((taken, inherited))))
}

/// `admin.metrics_listen`, bound before start-up completes so a taken port
/// fails the start as the client listeners do (or taken over with them).
/// Changing it takes a restart.
async fn bind_metrics(
    config: &Config,
    taken: Option<&mut Received>,
    handover: &mut Handover,
) -> Result<Option<tokio::net::TcpListener>, String> {
    let Some(addr) = config.admin.metrics_listen else {
        return Ok(None);
    };
    let l = match taken.and_then(|(_, left)| left.take_tcp(addr)) {
        Some(l) => tokio::net::TcpListener::from_std(l),
        None => tokio::net::TcpListener::bind(addr).await,
    }
    .map_err(|e| format!("admin.metrics_listen {addr}: {e}"))?;
    handover.include(&l).map_err(|e| e.to_string())?;
    Ok(Some(l))
}

/// This process accepts now: only then may the old one stop. Cancel keys
/// unknown here go to it from then on.
async fn confirm_takeover(taken: Taken, pooler: &Arc<Pooler>) {
    match taken.accepting().await {
        Ok((old, forwarder, arrivals)) => {
            tracing::info!(pid = old, "took over; the old process drains");
            let pass_on = move |pid, secret| forwarder.forward(pid, secret);
            let _ = pooler.cancel_elsewhere.set(Box::new(pass_on));
            if let Some(arrivals) = arrivals {
                adopt_clients(arrivals, pooler);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "takeover: the old process did not confirm; it may still accept too")
        }
    }
}

/// Serves the clients the old process hands over, each as a session of
/// this process (read on a thread, served on the runtime).
fn adopt_clients(arrivals: takeover::wire::Conn, pooler: &Arc<Pooler>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let deliver = move |client, fd| {
        let _ = tx.send((client, fd));
    };
    if let Err(e) = takeover::receive(arrivals, deliver) {
        tracing::warn!(error = %e, "takeover: cannot take clients over; they drain on the old process");
        return;
    }
    let pooler = pooler.clone();
    tokio::spawn(async move {
        while let Some((client, fd)) = rx.recv().await {
            let session = crate::client::adopt(pooler.clone(), client, fd);
            pooler.tasks.spawn(session);
        }
    });
}

/// Cancels a successor passes on, once this process has handed over and
/// drains: each is served as a CancelRequest that reached this process.
fn cancels_from_successor(pooler: &Arc<Pooler>) -> mpsc::UnboundedSender<(i32, i32)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(i32, i32)>();
    let pooler = pooler.clone();
    tokio::spawn(async move {
        while let Some((pid, secret)) = rx.recv().await {
            crate::client::cancel(&pooler, pid, secret).await;
        }
    });
    tx
}

/// `service.user` (or `--user`): switch now that every socket is bound.
fn drop_privileges(
    config: &Config,
    cli_user: Option<&str>,
    listeners: &Listeners,
    control_file: Option<&Path>,
) -> Result<(), String> {
    let Some(name) = cli_user.or(config.service.user.as_deref()) else {
        return Ok(());
    };
    let user = privileges::lookup(name).map_err(|e| e.to_string())?;
    let own: Vec<&Path> = listeners
        .own_socket_file()
        .into_iter()
        .chain(logfile::installed().map(LogFile::path))
        .chain(control_file)
        .collect();
    privileges::switch(&user, &own).map_err(|e| e.to_string())?;
    if let Err(e) = std::fs::File::open(&config.path) {
        tracing::warn!(path = %config.path.display(), user = %user.name, error = %e, "service.user cannot read the config file: RELOAD and SIGHUP will fail");
    }
    Ok(())
}
