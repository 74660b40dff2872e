//! A body on its way through an inspected exchange: its bytes are charged
//! to the run, a request's is searched for placeholders, and an answer's
//! has the session's values replaced by their placeholders.

use crate::run::Run;
use crate::secrets::stream::{Redactor, Scanner};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Boxed = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// Why an exchange was stopped part-way, for the reply and the record.
pub type Stopped = Arc<Mutex<Option<String>>>;

/// What a body is checked for.
pub enum Watch {
    /// A request's: a placeholder stops it.
    Placeholders(Scanner),
    /// An answer's: values become placeholders.
    Values(Redactor),
    Nothing,
}

pub struct Watched<B> {
    inner: B,
    watch: Watch,
    run: Arc<Run>,
    host: String,
    port: u16,
    stopped: Stopped,
    done: bool,
}

impl<B> Watched<B> {
    pub fn new(
        inner: B,
        watch: Watch,
        run: Arc<Run>,
        host: &str,
        port: u16,
        stopped: Stopped,
    ) -> Self {
        Watched {
            inner,
            watch,
            run,
            host: host.to_string(),
            port,
            stopped,
            done: false,
        }
    }

    /// Stops the exchange: recorded for the run here (an answer's body
    /// is past any reply), and kept for the request's reply.
    fn stop(&self, why: String) -> BoxError {
        tracing::info!(
            host = self.host,
            port = self.port,
            why,
            "egress: stopped an exchange"
        );
        self.run.log.denied(&self.host, self.port, &why);
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
        why.into()
    }

    /// Charges `n` bytes to the run; the error once its budget is spent.
    fn charge(&self, n: usize) -> Result<(), BoxError> {
        if !self.run.take_bytes(n) {
            return Err(self.stop(format!(
                "cut: the run moved its {} bytes through the proxy (network.max_bytes)",
                self.run.budget.max_bytes
            )));
        }
        self.run.log.moved(&self.host, self.port, n as u64);
        Ok(())
    }
}

impl<B> Body for Watched<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => {
                this.done = true;
                if let Watch::Values(r) = &mut this.watch {
                    let rest = r.finish();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest))));
                    }
                }
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Some(Ok(f))) => f,
        };
        let Some(data) = frame.data_ref() else {
            return Poll::Ready(Some(Ok(frame)));
        };
        if let Err(e) = this.charge(data.len()) {
            return Poll::Ready(Some(Err(e)));
        }
        let out = match &mut this.watch {
            Watch::Nothing => data.clone(),
            Watch::Placeholders(s) => match s.feed(data) {
                None => data.clone(),
                Some(name) => {
                    let why = format!(
                        "the placeholder of secret {name} is in the request's body, where it is never placed"
                    );
                    return Poll::Ready(Some(Err(this.stop(why))));
                }
            },
            Watch::Values(r) => r.push(data),
        };
        Poll::Ready(Some(Ok(Frame::data(out))))
    }

    fn is_end_stream(&self) -> bool {
        // A redactor may still hold the tail of the answer.
        self.done || (self.inner.is_end_stream() && !matches!(self.watch, Watch::Values(_)))
    }

    fn size_hint(&self) -> SizeHint {
        match self.watch {
            // Replacing changes the length: the answer is sent chunked.
            Watch::Values(_) => SizeHint::default(),
            _ => self.inner.size_hint(),
        }
    }
}
