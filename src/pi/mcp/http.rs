//! Just enough HTTP/1.1 for the bridge's MCP endpoint: read one bounded
//! request from a keep-alive connection in two steps (head, then body), and
//! write one response.
//!
//! Why not hyper or the `rmcp` SDK's axum server: the endpoint serves one
//! client (agy, on loopback) a handful of small JSON POSTs per turn, and the
//! decisions that matter (accept agy's `MCP-Protocol-Version: 2026-07-28`,
//! authenticate from the head before a body byte is read, cap everything,
//! notice when agy hangs up on a parked call) stay in our hands. The header
//! block is parsed by `httparse` (a small, fuzzed, widely used parser); what
//! is ours is the framing around it.
//!
//! Limits, and why (issue 17: anyone on the machine can connect):
//! - the head is at most [`HEADER_CAP`] bytes and [`MAX_HEADERS`] fields
//!   (431 beyond), so an endless header block costs us at most that;
//! - the body is read only when the caller asks ([`read_body`]), after it
//!   has authenticated the head, and never beyond the caller's cap (413);
//! - every size sum is checked arithmetic: a chunk size of
//!   `ffffffffffffffff` is a 413, not an overflow;
//! - chunk-size lines are at most [`CHUNK_LINE_CAP`] bytes and trailers at
//!   most [`HEADER_CAP`] in all;
//! - a request with both `Content-Length` and `Transfer-Encoding`, two
//!   different lengths, or a coding other than `chunked` is refused (400):
//!   such requests are how smuggling starts, and agy never sends them.
//!
//! Time limits (slowloris) belong to the caller, which wraps each step in a
//! deadline; see [`super::server`].

use tokio::io::{AsyncRead, AsyncReadExt};

/// Header block limit (request line and headers).
pub(crate) const HEADER_CAP: usize = 32 * 1024;
/// Header fields per request (agy sends about eight).
pub(crate) const MAX_HEADERS: usize = 64;
/// A chunk-size line with its extensions.
pub(crate) const CHUNK_LINE_CAP: usize = 4 * 1024;
/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8 * 1024;

/// How the body of a request is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (no `Content-Length`, no `Transfer-Encoding`).
    Empty,
    Length(usize),
    Chunked,
}

/// One parsed request; `body` is empty until [`read_body`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub method: String,
    /// The path without its query.
    pub path: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub framing: Framing,
    pub body: Vec<u8>,
    /// HTTP/1.0, or `Connection: close`.
    pub close: bool,
}

impl Request {
    /// The first header of that (lower-case) name.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read; each maps to one status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("request headers over {HEADER_CAP} bytes or {MAX_HEADERS} fields")]
    HeadersTooLarge,
    #[error("request body over {0} bytes")]
    BodyTooLarge(usize),
    #[error("connection closed mid-request")]
    Closed,
}

impl HttpError {
    pub(crate) fn status(&self) -> (u16, &'static str) {
        match self {
            HttpError::Malformed(_) => (400, "Bad Request"),
            HttpError::HeadersTooLarge => (431, "Request Header Fields Too Large"),
            HttpError::BodyTooLarge(_) => (413, "Content Too Large"),
            HttpError::Closed => (400, "Bad Request"),
        }
    }
}

/// Read more bytes into `buf`; `Closed` at end of stream.
async fn fill<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> Result<(), HttpError> {
    let mut chunk = [0u8; READ_CHUNK];
    match r.read(&mut chunk).await {
        Ok(0) | Err(_) => Err(HttpError::Closed),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Read one request's head; `Ok(None)` when the peer closed between
/// requests. `buf` carries bytes already read (keep-alive, pipelining) in and
/// out; on success it holds what follows the head (the body, if any).
pub(crate) async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> Result<Option<Request>, HttpError> {
    loop {
        if let Some((len, req)) = parse_head(buf)? {
            buf.drain(..len);
            return Ok(Some(req));
        }
        if buf.len() > HEADER_CAP {
            return Err(HttpError::HeadersTooLarge);
        }
        match fill(r, buf).await {
            Err(HttpError::Closed) if buf.is_empty() => return Ok(None),
            other => other?,
        }
    }
}

/// The head at the start of `buf` and its length, once it is complete.
fn parse_head(buf: &[u8]) -> Result<Option<(usize, Request)>, HttpError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeadersTooLarge),
        Err(e) => return Err(HttpError::Malformed(e.to_string())),
    };
    if len > HEADER_CAP {
        return Err(HttpError::HeadersTooLarge);
    }
    let mut headers = Vec::with_capacity(parsed.headers.len());
    for h in parsed.headers.iter() {
        let value = std::str::from_utf8(h.value)
            .map_err(|_| HttpError::Malformed(format!("header {:?} is not UTF-8", h.name)))?;
        headers.push((h.name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let target = parsed.path.unwrap_or("");
    let mut req = Request {
        method: parsed.method.unwrap_or("").to_string(),
        path: target.split('?').next().unwrap_or("").to_string(),
        close: parsed.version != Some(1),
        headers,
        framing: Framing::Empty,
        body: Vec::new(),
    };
    let close = req
        .all("connection")
        .flat_map(|c| c.split(','))
        .any(|c| c.trim().eq_ignore_ascii_case("close"));
    req.close |= close;
    req.framing = framing(&req)?;
    Ok(Some((len, req)))
}

/// The body framing the headers declare, refusing ambiguous ones.
fn framing(req: &Request) -> Result<Framing, HttpError> {
    let codings: Vec<&str> = req
        .all("transfer-encoding")
        .flat_map(|t| t.split(','))
        .map(str::trim)
        .collect();
    let lengths: Vec<&str> = req.all("content-length").collect();
    if !codings.is_empty() {
        if !lengths.is_empty() {
            return Err(HttpError::Malformed(
                "both Content-Length and Transfer-Encoding".into(),
            ));
        }
        return match codings.as_slice() {
            [one] if one.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(HttpError::Malformed(format!(
                "transfer-encoding {codings:?}"
            ))),
        };
    }
    let mut length = None;
    for v in lengths {
        let n = (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .then(|| v.parse::<usize>().ok())
            .flatten()
            .ok_or_else(|| HttpError::Malformed(format!("content-length {v:?}")))?;
        if length.is_some_and(|l| l != n) {
            return Err(HttpError::Malformed("two different content-lengths".into()));
        }
        length = Some(n);
    }
    Ok(length.map_or(Framing::Empty, Framing::Length))
}

/// Read the body `req.framing` declares into `req.body`, at most `cap`
/// bytes (413 beyond, found out before those bytes are read where the
/// framing says so up front).
pub(crate) async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    req: &mut Request,
    cap: usize,
) -> Result<(), HttpError> {
    req.body = match req.framing {
        Framing::Empty => Vec::new(),
        Framing::Chunked => read_chunked(r, buf, cap).await?,
        Framing::Length(len) => {
            if len > cap {
                return Err(HttpError::BodyTooLarge(cap));
            }
            while buf.len() < len {
                fill(r, buf).await?;
            }
            buf.drain(..len).collect()
        }
    };
    Ok(())
}

/// [`read_head`] then [`read_body`], for callers with nothing to check in
/// between.
#[cfg(test)]
pub(crate) async fn read_request<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    body_cap: usize,
) -> Result<Option<Request>, HttpError> {
    let Some(mut req) = read_head(r, buf).await? else {
        return Ok(None);
    };
    read_body(r, buf, &mut req, body_cap).await?;
    Ok(Some(req))
}

/// One CRLF-terminated line of at most `cap` bytes, without its CRLF.
async fn read_line<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> Result<Vec<u8>, HttpError> {
    loop {
        if let Some(end) = find(buf, b"\r\n") {
            if end > cap {
                return Err(HttpError::HeadersTooLarge);
            }
            let line = buf[..end].to_vec();
            buf.drain(..end + 2);
            return Ok(line);
        }
        if buf.len() > cap {
            return Err(HttpError::HeadersTooLarge);
        }
        fill(r, buf).await?;
    }
}

/// A chunk-size line's size: hex digits (at most 16), then extensions.
fn chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let digits = line.split(|b| *b == b';').next().unwrap_or(&[]);
    let digits = String::from_utf8_lossy(digits);
    let digits = digits.trim();
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HttpError::Malformed(format!("chunk size {digits:?}")));
    }
    u64::from_str_radix(digits, 16)
        .map_err(|_| HttpError::Malformed(format!("chunk size {digits:?}")))
}

async fn read_chunked<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        let size = chunk_size(&read_line(r, buf, CHUNK_LINE_CAP).await?)?;
        if size == 0 {
            return read_trailers(r, buf).await.map(|()| body);
        }
        // `body.len() <= cap` holds here, so the subtraction cannot wrap.
        let room = cap.saturating_sub(body.len());
        let size = match usize::try_from(size) {
            Ok(s) if s <= room => s,
            _ => return Err(HttpError::BodyTooLarge(cap)),
        };
        let need = size.checked_add(2).ok_or(HttpError::BodyTooLarge(cap))?;
        while buf.len() < need {
            fill(r, buf).await?;
        }
        if &buf[size..need] != b"\r\n" {
            return Err(HttpError::Malformed("chunk not followed by CRLF".into()));
        }
        body.extend(buf.drain(..size));
        buf.drain(..2);
    }
}

/// Trailer fields up to the empty line, discarded; at most [`HEADER_CAP`].
async fn read_trailers<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> Result<(), HttpError> {
    let mut total = 0usize;
    loop {
        let line = read_line(r, buf, HEADER_CAP).await?;
        if line.is_empty() {
            return Ok(());
        }
        total = total.saturating_add(line.len() + 2);
        if total > HEADER_CAP {
            return Err(HttpError::HeadersTooLarge);
        }
    }
}

/// A complete response with a body (`Content-Length` framed).
pub(crate) fn response(
    status: u16,
    reason: &str,
    content_type: Option<&str>,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(t) = content_type {
        head.push_str(&format!("Content-Type: {t}\r\n"));
    }
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8], cap: usize) -> (Result<Option<Request>, HttpError>, Vec<u8>) {
        let mut r = bytes;
        let mut buf = Vec::new();
        let got = read_request(&mut r, &mut buf, cap).await;
        (got, buf)
    }

    #[tokio::test]
    async fn content_length_body_and_pipelined_rest() {
        let raw =
            b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nX-Token: t\r\n\r\n{}GET";
        let (got, rest) = parse(raw, 100).await;
        let req = got.expect("ok").expect("a request");
        assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/mcp"));
        assert_eq!(req.header("x-token"), Some("t"));
        assert_eq!(req.body, b"{}");
        assert!(!req.close);
        assert_eq!(rest, b"GET");
    }

    #[tokio::test]
    async fn chunked_body() {
        let raw = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\n{\"a\r\n3;ext\r\n\":1\r\n1\r\n}\r\n0\r\n\r\n";
        let req = parse(raw, 100).await.0.expect("ok").expect("request");
        assert_eq!(req.body, b"{\"a\":1}");
        assert!(req.close);
    }

    #[tokio::test]
    async fn caps_and_malformed_requests() {
        let big = b"POST /mcp HTTP/1.1\r\nContent-Length: 101\r\n\r\n";
        assert_eq!(parse(big, 100).await.0, Err(HttpError::BodyTooLarge(100)));
        let chunked_big = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n";
        assert_eq!(
            parse(chunked_big, 100).await.0,
            Err(HttpError::BodyTooLarge(100))
        );
        let mut huge = b"POST /mcp HTTP/1.1\r\nX: ".to_vec();
        huge.extend(vec![b'a'; HEADER_CAP + 10]);
        assert_eq!(parse(&huge, 100).await.0, Err(HttpError::HeadersTooLarge));
        assert!(matches!(
            parse(b"nonsense\r\n\r\n", 100).await.0,
            Err(HttpError::Malformed(_))
        ));
        assert_eq!(parse(b"", 100).await.0, Ok(None));
        assert_eq!(
            parse(b"POST /mcp HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}", 100)
                .await
                .0,
            Err(HttpError::Closed)
        );
    }

    #[tokio::test]
    async fn a_chunk_size_of_all_ones_is_too_large_not_an_overflow() {
        // Issue 17, finding 5: `body.len() + size` overflowed and panicked.
        let raw = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\nffffffffffffffff\r\n";
        assert_eq!(parse(raw, 100).await.0, Err(HttpError::BodyTooLarge(100)));
        let raw = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n";
        assert_eq!(
            parse(raw, usize::MAX).await.0,
            Err(HttpError::BodyTooLarge(usize::MAX)),
            "even an unbounded cap cannot make size + CRLF overflow"
        );
        let raw = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n";
        assert!(matches!(
            parse(raw, 100).await.0,
            Err(HttpError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn ambiguous_framing_is_refused() {
        for raw in [
            &b"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        ] {
            let got = parse(raw, 100).await.0;
            assert!(matches!(got, Err(HttpError::Malformed(_))), "{got:?}");
        }
    }

    #[tokio::test]
    async fn the_head_is_read_without_the_body() {
        // Issue 17, finding 6: the server can refuse a request from its head
        // before a byte of a large body is read.
        let raw = b"POST /mcp HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n";
        let mut r = &raw[..];
        let mut buf = Vec::new();
        let req = read_head(&mut r, &mut buf)
            .await
            .expect("ok")
            .expect("head");
        assert_eq!(req.framing, Framing::Length(4 * 1024 * 1024));
        assert!(req.body.is_empty() && buf.is_empty());
    }

    /// A reader handing out its bytes a few at a time, like a slow socket.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            out: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let end = self
                .data
                .len()
                .min(self.at + self.step)
                .min(self.at + out.remaining());
            let at = self.at;
            out.put_slice(&self.data[at..end]);
            self.at = end;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// Parse `data` fed `step` bytes at a time; the request (if any) and the
    /// most memory the buffer and body held.
    fn run(data: Vec<u8>, step: usize, cap: usize) -> (Result<Option<Request>, HttpError>, usize) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut r = Trickle { data, at: 0, step };
            let mut buf = Vec::new();
            let got = read_request(&mut r, &mut buf, cap).await;
            let held = buf.capacity()
                + got
                    .as_ref()
                    .map_or(0, |o| o.as_ref().map_or(0, |q| q.body.capacity()));
            (got, held)
        })
    }

    /// What the framing may hold at most: a head, a body, a read's worth of
    /// slack and the allocator's doubling.
    fn bound(cap: usize) -> usize {
        2 * (HEADER_CAP + cap + 2 * READ_CHUNK)
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic_or_hoard(
            data in proptest::collection::vec(any::<u8>(), 0..4096),
            step in 1usize..64,
        ) {
            let (_, held) = run(data, step, 1024);
            prop_assert!(held <= bound(1024), "held {held}");
        }

        #[test]
        fn arbitrary_chunk_sizes_never_panic_or_pass_the_cap(
            sizes in proptest::collection::vec(any::<u64>(), 1..6),
            small in proptest::collection::vec(0u64..64, 1..6),
            ext in proptest::option::of("[a-z=;]{0,12}"),
            step in 1usize..512,
        ) {
            let cap = 1024;
            let mut data = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for (i, size) in sizes.iter().chain(&small).enumerate() {
                let size = if i % 2 == 0 { *size } else { *size % 300 };
                data.extend(format!("{size:x}{}\r\n", ext.as_deref().map(|e| format!(";{e}")).unwrap_or_default()).bytes());
                let real = usize::try_from(size).unwrap_or(usize::MAX).min(2048);
                data.extend(std::iter::repeat_n(b'x', real));
                data.extend(b"\r\n");
            }
            data.extend(b"0\r\n\r\n");
            let (got, held) = run(data, step, cap);
            prop_assert!(held <= bound(cap), "held {held}");
            if let Ok(Some(req)) = got {
                prop_assert!(req.body.len() <= cap);
            }
        }

        #[test]
        fn arbitrary_header_blocks_parse_or_are_refused(
            fields in proptest::collection::vec((header_name(), header_value()), 0..12),
            body in proptest::collection::vec(any::<u8>(), 0..256),
            step in 1usize..128,
        ) {
            let cap = 1024;
            let mut data = b"POST /mcp?q HTTP/1.1\r\n".to_vec();
            for (name, value) in &fields {
                data.extend(format!("{name}: {value}\r\n").bytes());
            }
            data.extend(b"\r\n");
            data.extend(&body);
            let (got, held) = run(data, step, cap);
            prop_assert!(held <= bound(cap), "held {held}");
            match got {
                Ok(Some(req)) => {
                    prop_assert_eq!(req.path.as_str(), "/mcp");
                    prop_assert!(req.headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
                    prop_assert!(req.body.len() <= cap);
                    if let Framing::Length(n) = req.framing {
                        prop_assert_eq!(req.body.len(), n);
                    }
                }
                // The peer "closed" before sending a request: nothing to say.
                Ok(None) => prop_assert!(false, "a head was sent"),
                // Every refusal is a typed error with its status.
                Err(e) => prop_assert!(matches!(e.status().0, 400 | 413 | 431), "{e:?}"),
            }
        }
    }

    /// Header names, the framing ones most of all.
    fn header_name() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("Content-Length".to_string()),
            Just("content-length".to_string()),
            Just("Transfer-Encoding".to_string()),
            Just("Connection".to_string()),
            Just("Host".to_string()),
            "[A-Za-z-]{1,12}",
        ]
    }

    /// Header values: lengths (huge ones too), codings, and anything printable.
    fn header_value() -> impl Strategy<Value = String> {
        prop_oneof![
            (0u64..300).prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            "[0-9]{18,30}",
            Just("chunked".to_string()),
            Just("gzip, chunked".to_string()),
            Just("close".to_string()),
            "[ -~]{0,40}",
        ]
    }
}
