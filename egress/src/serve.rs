//! Serving one jail's listener: each connection's request head is read and
//! parsed, its target decided, and then its bytes relayed within the run's
//! budgets. Everything the jail sends is hostile: the head is capped in size
//! and time, and a connection that breaks a budget is cut.

use crate::decide::decide;
use crate::http::{read_head, reply, Refused, Request};
use crate::inspect::Inspection;
use crate::relay::{pump, pump_watching, Stop};
use crate::resolve::Resolver;
use crate::run::{Current, Run};
use crate::secrets::stream::Scanner;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const HEAD_TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Connections one listener serves at once, whatever the run's budget.
const MAX_CONCURRENT: usize = 64;

/// What every listener of the proxy shares.
#[derive(Debug, Clone)]
pub struct Edge {
    pub resolver: Resolver,
    pub inspection: Inspection,
}

/// Serves `listener` until `stop`, each connection under the run current
/// when it arrived, and for no longer than that run lasts.
pub async fn serve(listener: TcpListener, current: Current, edge: Edge, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONCURRENT));
    loop {
        let (conn, permit) = tokio::select! {
            _ = stop.cancelled() => break,
            permit = slots.clone().acquire_owned() => {
                let Ok(permit) = permit else { break };
                match listener.accept().await {
                    Ok((conn, _)) => (conn, permit),
                    Err(e) => {
                        tracing::debug!(error = %e, "egress: accept failed");
                        continue;
                    }
                }
            }
        };
        let run = current.get();
        let (edge, stop, current) = (edge.clone(), stop.clone(), current.clone());
        let work = {
            let run = run.clone();
            async move {
                tokio::select! {
                    _ = handle(conn, run, &current, &edge) => {}
                    _ = stop.cancelled() => {}
                }
                drop(permit);
            }
        };
        run.serve(work);
    }
}

/// One client connection: read its head, then relay or refuse.
async fn handle(mut conn: TcpStream, run: Arc<Run>, current: &Current, edge: &Edge) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut conn)).await {
        Ok(Ok(h)) => h,
        Ok(Err(why)) => return reply(&mut conn, 400, "Bad Request", why).await,
        Err(_) => return reply(&mut conn, 408, "Request Timeout", "no request head").await,
    };
    let req = match Request::parse(&head.bytes) {
        Ok(r) => r,
        Err(Refused::Malformed(why)) => return reply(&mut conn, 400, "Bad Request", why).await,
        // It names a target: the run's record says what was tried, and why not.
        Err(Refused::Inconsistent { host, port, reason }) => {
            run.log.denied(&host, port, &reason);
            tracing::info!(
                host,
                port,
                reason,
                "egress: refused an inconsistent request"
            );
            let body = format!("prims egress: {reason}");
            return reply(&mut conn, 400, "Bad Request", &body).await;
        }
    };
    let (host, port) = (req.host.as_str(), req.port);
    // Plain HTTP is never inspected: a placeholder in it is refused. (A
    // tunnel's bytes are TLS, inspected or passed through: not searched.)
    let mut scanner = req
        .forward
        .as_ref()
        .map(|_| Scanner::placeholders(&run.rules.placements))
        .filter(|s| !s.is_empty());
    let refused = match decide(&run.rules, &edge.resolver, host, port).await {
        Err(reason) => Err(reason),
        Ok(_) if run.out_of_bytes() => Err(format!(
            "the run already moved its {} bytes through the proxy (network.max_bytes)",
            run.budget.max_bytes
        )),
        Ok(_) if !run.take_connection() => Err(format!(
            "the run opened its {} connections already (network.max_connections)",
            run.budget.max_connections
        )),
        Ok(addrs) => match (&mut scanner, &req.forward) {
            (Some(s), Some(head)) => match s.feed(head) {
                Some(name) => Err(format!(
                    "the placeholder of secret {name} was sent over plain HTTP, where it is never placed; use https://"
                )),
                None => Ok(addrs),
            },
            _ => Ok(addrs),
        },
    };
    let addrs = match refused {
        Ok(addrs) => addrs,
        Err(reason) => {
            if run.is_idle() {
                current.refused_while_idle(host, port, &reason);
            } else {
                run.log.denied(host, port, &reason);
            }
            tracing::info!(host, port, reason, "egress: refused");
            let body = format!("prims egress: {reason}");
            return reply(&mut conn, 403, "Forbidden", &body).await;
        }
    };
    let mut upstream = match connect(&addrs).await {
        Ok(s) => s,
        Err(why) => {
            let why = format!("prims egress: cannot reach {host}:{port}: {why}");
            return reply(&mut conn, 502, "Bad Gateway", &why).await;
        }
    };
    run.log.allowed(host, port);
    tracing::info!(host, port, "egress: allowed");
    if req.forward.is_none() && run.rules.inspects(host) {
        if conn
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        let _ = conn.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        if !head.rest.is_empty() {
            let why = "the client sent bytes before its tunnel was established";
            return run.log.denied(host, port, why);
        }
        return crate::inspect::tunnel(conn, upstream, host, port, run.clone(), &edge.inspection)
            .await;
    }
    let after_head = head.rest.len();
    let first: Vec<u8> = match &req.forward {
        None => {
            if conn
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            head.rest
        }
        Some(rewritten) => [rewritten.as_slice(), &head.rest].concat(),
    };
    if !first.is_empty() {
        // The head was searched already; what came after it was not.
        if let Some(name) = scanner
            .as_mut()
            .and_then(|s| s.feed(&first[first.len() - after_head..]))
        {
            return refused_body(&run, host, port, name);
        }
        if !run.take_bytes(first.len()) {
            return cut(&run, host, port);
        }
        run.log.moved(host, port, first.len() as u64);
        if upstream.write_all(&first).await.is_err() {
            return;
        }
    }
    // Small writes (a response head) go out at once, as they would directly.
    let _ = conn.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let outward = async {
        match scanner.as_mut() {
            None => pump(&conn, &upstream, &run, host, port).await,
            Some(s) => pump_watching(&conn, &upstream, &run, (host, port), s).await,
        }
    };
    let both = tokio::try_join!(outward, pump(&upstream, &conn, &run, host, port));
    match both {
        Err(Stop::Cut) => cut(&run, host, port),
        Err(Stop::Placeholder(name)) => refused_body(&run, host, port, &name),
        _ => {}
    }
}

fn refused_body(run: &Run, host: &str, port: u16, name: &str) {
    let reason = format!(
        "cut: the placeholder of secret {name} was sent over plain HTTP, where it is never placed; use https://"
    );
    tracing::info!(host, port, "egress: {reason}");
    run.log.denied(host, port, &reason);
}

fn cut(run: &Run, host: &str, port: u16) {
    let reason = format!(
        "cut: the run moved its {} bytes through the proxy (network.max_bytes)",
        run.budget.max_bytes
    );
    tracing::info!(host, port, "egress: {reason}");
    run.log.denied(host, port, &reason);
}

async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for a in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = format!("{a}: {e}"),
            Err(_) => last = format!("{a} did not answer within {CONNECT_TIMEOUT:?}"),
        }
    }
    Err(last)
}
