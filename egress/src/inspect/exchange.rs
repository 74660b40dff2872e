//! One request and its answer in an inspected tunnel, checked in this
//! order: the `Host` names the tunnel's host, the run's budget holds, the
//! placeholders are where they may be (and the values then put in place),
//! the body carries none; the answer's copies of values become
//! placeholders again.

use super::body::{Boxed, Stopped, Watch, Watched};
use crate::run::Run;
use crate::secrets::aws::resign;
use crate::secrets::place::place;
use crate::secrets::stream::{Redactor, Scanner};
use crate::secrets::Values;
use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT_ENCODING, CONTENT_LENGTH, HOST};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use std::sync::Arc;

/// The proxy's side of HTTP/1.1 to the upstream.
pub(super) type Sender = hyper::client::conn::http1::SendRequest<Boxed>;

pub(super) struct Exchange {
    host: String,
    port: u16,
    run: Arc<Run>,
    upstream: tokio::sync::Mutex<Result<Sender, String>>,
    values: Values,
}

impl Exchange {
    pub fn new(
        host: &str,
        port: u16,
        run: Arc<Run>,
        upstream: Result<Sender, String>,
        values: Values,
    ) -> Self {
        Exchange {
            host: host.to_string(),
            port,
            run,
            upstream: tokio::sync::Mutex::new(upstream),
            values,
        }
    }

    pub async fn answer(&self, mut req: Request<Incoming>) -> Response<Boxed> {
        let (host, port) = (self.host.as_str(), self.port);
        if let Err(why) = same_host(&req, host, port) {
            return self.refuse(StatusCode::FORBIDDEN, why);
        }
        if self.run.out_of_bytes() {
            let why = format!(
                "the run already moved its {} bytes through the proxy (network.max_bytes)",
                self.run.budget.max_bytes
            );
            return self.refuse(StatusCode::FORBIDDEN, why);
        }
        let placements = &self.run.rules.placements;
        let values = self.values.now();
        let target = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        if let Err(why) = place(&target, req.headers_mut(), host, placements, &values) {
            return self.refuse(StatusCode::FORBIDDEN, why);
        }
        let method = req.method().as_str().to_string();
        if let Err(why) = resign(&method, &target, req.headers_mut(), placements, &values) {
            return self.refuse(StatusCode::FORBIDDEN, why);
        }
        let serves_here = placements.iter().any(|p| p.serves(host));
        if serves_here {
            // A compressed answer would hide an echoed value from the
            // redactor.
            req.headers_mut()
                .insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        }
        let client_upgrade = hyper::upgrade::on(&mut req);
        let (mut parts, body) = req.into_parts();
        if let Ok(uri) = target.parse() {
            parts.uri = uri;
        }
        let stopped = Stopped::default();
        let scanner = Scanner::placeholders(placements);
        let watch = if scanner.is_empty() {
            Watch::Nothing
        } else {
            Watch::Placeholders(scanner)
        };
        let body = Watched::new(body, watch, self.run.clone(), host, port, stopped.clone());
        let request = Request::from_parts(parts, body.boxed_unsync());
        let sent = {
            let mut upstream = self.upstream.lock().await;
            let sender = match upstream.as_mut() {
                Ok(s) => s,
                Err(why) => return self.fail(why.clone()),
            };
            if sender.ready().await.is_err() {
                return self.fail(format!("{host} closed the connection"));
            }
            sender.send_request(request).await
        };
        let answer = match sent {
            Ok(a) => a,
            Err(e) => {
                let why = stopped.lock().unwrap_or_else(|p| p.into_inner()).take();
                // A stopped body was recorded where it stopped.
                return match why {
                    Some(why) => reply(StatusCode::FORBIDDEN, &why),
                    None => self.fail(format!("{host}: {e}")),
                };
            }
        };
        self.pass_back(answer, client_upgrade, &values)
    }

    /// The upstream's answer, with the session's values replaced.
    fn pass_back(
        &self,
        mut answer: Response<Incoming>,
        client_upgrade: hyper::upgrade::OnUpgrade,
        values: &std::collections::HashMap<String, crate::secrets::SecretValue>,
    ) -> Response<Boxed> {
        if answer.status() == StatusCode::SWITCHING_PROTOCOLS {
            let upstream_upgrade = hyper::upgrade::on(&mut answer);
            let (run, host, port) = (self.run.clone(), self.host.clone(), self.port);
            tokio::spawn(async move {
                if let (Ok(a), Ok(b)) = (client_upgrade.await, upstream_upgrade.await) {
                    let mut a = hyper_util::rt::TokioIo::new(a);
                    let mut b = hyper_util::rt::TokioIo::new(b);
                    if let Ok((up, down)) = tokio::io::copy_bidirectional(&mut a, &mut b).await {
                        let n = up + down;
                        let _ = run.take_bytes(n as usize);
                        run.log.moved(&host, port, n);
                    }
                }
            });
        }
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = self
            .run
            .rules
            .placements
            .iter()
            .filter_map(|p| {
                let v = values.get(&p.name)?;
                let mut pairs = vec![(
                    v.value.expose().as_bytes().to_vec(),
                    p.placeholder.as_bytes().to_vec(),
                )];
                if let (Some(id), Some(ph)) = (&v.key_id, &p.key_id_placeholder) {
                    pairs.push((id.expose().as_bytes().to_vec(), ph.as_bytes().to_vec()));
                }
                Some(pairs)
            })
            .flatten()
            .collect();
        let redactor = Redactor::new(pairs);
        let (mut parts, body) = answer.into_parts();
        let watch = if redactor.is_empty() {
            Watch::Nothing
        } else {
            for v in parts.headers.values_mut() {
                if let Some(clean) = redactor.redact(v.as_bytes()) {
                    if let Ok(c) = HeaderValue::from_bytes(&clean) {
                        *v = c;
                    }
                }
            }
            parts.headers.remove(CONTENT_LENGTH);
            Watch::Values(redactor)
        };
        let stopped = Stopped::default();
        let body = Watched::new(
            body,
            watch,
            self.run.clone(),
            &self.host,
            self.port,
            stopped,
        );
        Response::from_parts(parts, body.boxed_unsync())
    }

    /// A refusal: recorded for the run, and told to the client.
    fn refuse(&self, status: StatusCode, why: String) -> Response<Boxed> {
        tracing::info!(
            host = self.host,
            port = self.port,
            why,
            "egress: refused a request"
        );
        self.run.log.denied(&self.host, self.port, &why);
        reply(status, &why)
    }

    /// The upstream could not answer: told to the client.
    fn fail(&self, why: String) -> Response<Boxed> {
        reply(StatusCode::BAD_GATEWAY, &why)
    }
}

fn reply(status: StatusCode, why: &str) -> Response<Boxed> {
    let body = http_body_util::Full::new(Bytes::from(format!("prims egress: {why}\n")))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// That the request's `Host` (or its absolute URL's authority) names the
/// tunnel's host, and its port if it names one.
fn same_host(req: &Request<Incoming>, host: &str, port: u16) -> Result<(), String> {
    let hosts: Vec<&HeaderValue> = req.headers().get_all(HOST).iter().collect();
    let mut named: Vec<String> = hosts
        .iter()
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .collect();
    if let Some(a) = req.uri().authority() {
        named.push(a.as_str().to_string());
    }
    if named.is_empty() {
        return Err(format!("a request in the tunnel to {host} names no Host"));
    }
    if hosts.len() > 1 {
        return Err(format!(
            "a request in the tunnel to {host} has {} Host headers",
            hosts.len()
        ));
    }
    for n in &named {
        let ok = match crate::http::split_authority(n) {
            Ok((h, p)) => h == host && p.map_or(port == 443, |p| p == port),
            Err(_) => false,
        };
        if !ok {
            return Err(format!(
                "a request names Host {n:?} in a TLS tunnel allowed for {host}:{port}: domain fronting is refused"
            ));
        }
    }
    Ok(())
}
