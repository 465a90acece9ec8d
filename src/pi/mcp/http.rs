//! Just enough HTTP/1.1 for the bridge's MCP endpoint: read one bounded
//! request from a keep-alive connection, write one response.
//!
//! Why hand-written rather than hyper or the `rmcp` SDK's axum server: the
//! endpoint serves one client (agy, on loopback) a handful of small JSON
//! POSTs per turn. A bounded parser of ~150 lines adds no dependencies and no
//! compile time, and leaves every decision that matters to agy in our hands
//! (accept its `MCP-Protocol-Version: 2026-07-28`, cap headers and bodies,
//! notice when agy hangs up on a parked call). Supported: request line,
//! headers, `Content-Length` and `chunked` bodies, keep-alive, pipelining.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Header block limit (request line and headers).
pub const HEADER_CAP: usize = 32 * 1024;

/// One parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without its query.
    pub path: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// HTTP/1.0, or `Connection: close`.
    pub close: bool,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read; each maps to one status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("request headers over {HEADER_CAP} bytes")]
    HeadersTooLarge,
    #[error("request body over {0} bytes")]
    BodyTooLarge(usize),
    #[error("connection closed mid-request")]
    Closed,
}

impl HttpError {
    pub fn status(&self) -> (u16, &'static str) {
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
    let mut chunk = [0u8; 8192];
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

/// Read one request; `Ok(None)` when the peer closed between requests.
/// `buf` carries bytes already read (keep-alive, pipelining) in and out.
pub async fn read_request<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    body_cap: usize,
) -> Result<Option<Request>, HttpError> {
    let head_end = loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            break end;
        }
        if buf.len() > HEADER_CAP {
            return Err(HttpError::HeadersTooLarge);
        }
        match fill(r, buf).await {
            Err(HttpError::Closed) if buf.is_empty() => return Ok(None),
            other => other?,
        }
    };
    if head_end > HEADER_CAP {
        return Err(HttpError::HeadersTooLarge);
    }
    let head = String::from_utf8(buf[..head_end].to_vec())
        .map_err(|_| HttpError::Malformed("headers are not UTF-8".into()))?;
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let start = lines.next().unwrap_or("");
    let mut parts = start.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed(format!("request line {start:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Malformed(format!("version {version:?}")));
    }
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| HttpError::Malformed(format!("header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut req = Request {
        method: method.to_string(),
        path: target.split('?').next().unwrap_or("").to_string(),
        close: version == "HTTP/1.0",
        headers,
        body: Vec::new(),
    };
    req.close |= req
        .header("connection")
        .is_some_and(|c| c.eq_ignore_ascii_case("close"));
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    req.body = if chunked {
        read_chunked(r, buf, body_cap).await?
    } else {
        let len = match req.header("content-length") {
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| HttpError::Malformed(format!("content-length {v:?}")))?,
            None => 0,
        };
        if len > body_cap {
            return Err(HttpError::BodyTooLarge(body_cap));
        }
        while buf.len() < len {
            fill(r, buf).await?;
        }
        buf.drain(..len).collect()
    };
    Ok(Some(req))
}

async fn read_line<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> Result<String, HttpError> {
    loop {
        if let Some(end) = find(buf, b"\r\n") {
            let line = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 2);
            return Ok(line);
        }
        if buf.len() > HEADER_CAP {
            return Err(HttpError::HeadersTooLarge);
        }
        fill(r, buf).await?;
    }
}

async fn read_chunked<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    body_cap: usize,
) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        let line = read_line(r, buf).await?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| HttpError::Malformed(format!("chunk size {size:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(r, buf).await?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > body_cap {
            return Err(HttpError::BodyTooLarge(body_cap));
        }
        while buf.len() < size + 2 {
            fill(r, buf).await?;
        }
        body.extend(buf.drain(..size));
        buf.drain(..2);
    }
}

/// A complete response with a body (`Content-Length` framed).
pub fn response(
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
}
