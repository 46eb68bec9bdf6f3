//! A sandboxed Run's only way out: an HTTP proxy on the supervisor's side of a Unix socket that lets through the Account's endpoints and the hosts the config allows, resolves names itself, and counts every connection and refusal.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most a request's head may take before it is refused.
const HEAD_CAP: usize = 16 * 1024;

/// How long a connection to an allowed host may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The environment variable owl's init inside the sandbox finds the socket by.
pub(crate) const SOCKET_VAR: &str = "OWL_SANDBOX_NET";

/// Where a Run may connect: `host:port` pairs, or a host on any port. Names are compared
/// as written (lower case); an address is reachable only when it is listed itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Allowed {
    entries: Vec<(String, Option<u16>)>,
}

impl Allowed {
    /// From entries `host` or `host:port` (`[::1]:443` for an IPv6 address).
    pub(crate) fn new<'a>(entries: impl IntoIterator<Item = &'a str>) -> Allowed {
        let mut entries: Vec<(String, Option<u16>)> = entries
            .into_iter()
            .filter_map(|e| match split_host_port(e) {
                Some((host, port)) => Some((host, Some(port))),
                None if !e.is_empty() => Some((e.trim_matches(['[', ']']).to_lowercase(), None)),
                None => None,
            })
            .collect();
        entries.sort();
        entries.dedup();
        Allowed { entries }
    }

    fn permits(&self, host: &str, port: u16) -> bool {
        self.entries
            .iter()
            .any(|(h, p)| h == host && p.is_none_or(|p| p == port))
    }
}

/// `host:port` split, the host lower-cased and unbracketed; `None` without a port.
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host.trim_matches(['[', ']']);
    (!host.is_empty() && !host.contains(':') || s.starts_with('['))
        .then(|| (host.to_lowercase(), port))
}

/// What went through the proxy: connections by host, refusals by `host:port`.
#[derive(Debug, Default)]
struct Counts {
    reached: BTreeMap<String, u64>,
    refused: BTreeMap<String, u64>,
}

/// The proxy of one Run: its socket, its counts, and a flag that stops it.
pub(crate) struct NetProxy {
    socket: PathBuf,
    counts: Arc<Mutex<Counts>>,
    stop: Arc<AtomicBool>,
}

impl NetProxy {
    /// Listens on `socket` (made anew) and serves each connection on a thread of its own.
    pub(crate) fn start(socket: &Path, allowed: Allowed) -> io::Result<NetProxy> {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        // Connecting takes write permission: no other user of the machine goes through.
        std::fs::set_permissions(socket, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let counts = Arc::new(Mutex::new(Counts::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, allowed) = (counts.clone(), stop.clone(), Arc::new(allowed));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (c, allowed) = (c.clone(), allowed.clone());
                std::thread::spawn(move || serve(conn, &allowed, &c));
            }
        });
        Ok(NetProxy {
            socket: socket.to_path_buf(),
            counts,
            stop,
        })
    }

    /// What went through, as `show` says it: "network: 41 to api.anthropic.com; refused: 1
    /// to 127.0.0.1:45123"; `None` when nothing was tried.
    pub(crate) fn summary(&self) -> Option<String> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let list = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(host, n)| format!("{n} to {host}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (counts.reached.is_empty(), counts.refused.is_empty()) {
            (true, true) => None,
            (false, true) => Some(format!("network: {}", list(&counts.reached))),
            (true, false) => Some(format!("network: refused: {}", list(&counts.refused))),
            (false, false) => Some(format!(
                "network: {}; refused: {}",
                list(&counts.reached),
                list(&counts.refused)
            )),
        }
    }
}

impl Drop for NetProxy {
    fn drop(&mut self) {
        // The accept loop wakes for one more connection and sees the flag.
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.socket);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Serves one connection: its first request's head read, the target judged, then a
/// tunnel (`CONNECT`) or plain HTTP requests passed on one by one, each made relative.
fn serve(client: UnixStream, allowed: &Allowed, counts: &Mutex<Counts>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut reply) = client.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(client);
    let Some(head) = read_head(&mut reader) else {
        return;
    };
    let Some(request) = Request::parse(&head) else {
        let _ = reply.write_all(REFUSED_400);
        return;
    };
    let target = format!("{}:{}", request.host, request.port);
    if !allowed.permits(&request.host, request.port) {
        tracing::info!(%target, "the sandbox's proxy refused a connection");
        bump(counts, |c| &mut c.refused, target);
        let _ = reply.write_all(REFUSED_403);
        return;
    }
    let Some(upstream) = connect(&request.host, request.port) else {
        let _ = reply.write_all(FAILED_502);
        return;
    };
    bump(counts, |c| &mut c.reached, request.host.clone());
    let _ = reader.get_ref().set_read_timeout(None);
    let Ok(mut upstream_w) = upstream.try_clone() else {
        return;
    };
    let up = match request.forward {
        // A tunnel: the client speaks TLS (or anything) once it is told it is open.
        None => {
            if reply
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
            {
                return;
            }
            std::thread::spawn(move || {
                let _ = io::copy(&mut reader, &mut upstream_w);
                let _ = upstream_w.shutdown(Shutdown::Write);
            })
        }
        // Plain HTTP: each request on the connection goes on with its target made
        // relative, while it names the same host; another host ends the connection.
        Some(first) => std::thread::spawn(move || {
            let _ = forward_requests(&mut reader, &mut upstream_w, first, &target);
            let _ = upstream_w.shutdown(Shutdown::Write);
        }),
    };
    let mut upstream_r = upstream;
    let _ = io::copy(&mut upstream_r, &mut reply);
    let _ = reply.shutdown(Shutdown::Both);
    let _ = up.join();
}

const REFUSED_400: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const REFUSED_403: &[u8] =
    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const FAILED_502: &[u8] =
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

fn bump(
    counts: &Mutex<Counts>,
    which: impl Fn(&mut Counts) -> &mut BTreeMap<String, u64>,
    key: String,
) {
    let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
    *which(&mut c).entry(key).or_default() += 1;
}

/// A request's head up to its blank line; `None` at the end of the stream or on a head
/// over [`HEAD_CAP`].
fn read_head(reader: &mut impl BufRead) -> Option<String> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let n = reader
            .take((HEAD_CAP - head.len().min(HEAD_CAP)) as u64 + 1)
            .read_until(b'\n', &mut head)
            .ok()?;
        if n == 0 || head.len() > HEAD_CAP {
            return None;
        }
        if head[before..] == *b"\r\n" || head[before..] == *b"\n" {
            return Some(String::from_utf8_lossy(&head).into_owned());
        }
    }
}

/// Passes plain HTTP requests on, the first already read (`first`, made relative), each
/// with its body (by `Content-Length`, or chunk by chunk); a request for another host than
/// `target` ends it.
fn forward_requests(
    reader: &mut impl BufRead,
    upstream: &mut impl Write,
    first: String,
    target: &str,
) -> io::Result<()> {
    let mut head = first;
    loop {
        upstream.write_all(head.as_bytes())?;
        forward_body(reader, upstream, &head)?;
        let Some(next) = read_head(reader) else {
            return Ok(());
        };
        match Request::parse(&next) {
            Some(r) if format!("{}:{}", r.host, r.port) == target => {
                head = r.forward.unwrap_or_default();
            }
            _ => return Ok(()),
        }
    }
}

/// Copies a request's body as its head says it is sent.
fn forward_body(
    reader: &mut impl BufRead,
    upstream: &mut impl Write,
    head: &str,
) -> io::Result<()> {
    let field = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_ascii_lowercase())
        })
    };
    if field("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size_line = Vec::new();
            reader.read_until(b'\n', &mut size_line)?;
            upstream.write_all(&size_line)?;
            let size = String::from_utf8_lossy(&size_line);
            let size = size.trim().split(';').next().unwrap_or("");
            let size = u64::from_str_radix(size, 16).map_err(io::Error::other)?;
            if size == 0 {
                // The trailer, to its blank line.
                let trailer = read_head(reader).unwrap_or_default();
                return upstream.write_all(trailer.as_bytes());
            }
            io::copy(&mut reader.take(size + 2), upstream)?;
        }
    }
    let length: u64 = field("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    io::copy(&mut reader.take(length), upstream)?;
    Ok(())
}

/// A proxy request: where to, and for plain HTTP the head to send on.
#[derive(Debug, PartialEq)]
struct Request {
    host: String,
    port: u16,
    /// `None` for `CONNECT`; the head with an origin-form target for plain HTTP.
    forward: Option<String>,
}

impl Request {
    fn parse(head: &str) -> Option<Request> {
        let (line, fields) = head.split_once("\r\n").unwrap_or((head, ""));
        let mut parts = line.split(' ');
        let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_host_port(target)?;
            return Some(Request {
                host,
                port,
                forward: None,
            });
        }
        let rest = target.strip_prefix("http://")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority)
            .or_else(|| (!authority.is_empty()).then(|| (authority.to_lowercase(), 80)))?;
        Some(Request {
            host,
            port,
            forward: Some(format!("{method} {path} {version}\r\n{fields}")),
        })
    }
}

/// A connection to `host:port`, the name resolved here, outside the sandbox.
fn connect(host: &str, port: u16) -> Option<TcpStream> {
    let addrs = (host, port).to_socket_addrs().ok()?;
    addrs
        .into_iter()
        .find_map(|a| TcpStream::connect_timeout(&a, CONNECT_TIMEOUT).ok())
}

/// Inside the sandbox (owl's init): a TCP port on the sandbox's own loopback that passes
/// each connection to the proxy's socket. Returns the port, for the proxy variables.
pub(crate) fn relay(socket: PathBuf) -> io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(inside) = conn else { continue };
            let socket = socket.clone();
            std::thread::spawn(move || {
                if let Ok(out) = UnixStream::connect(&socket) {
                    relay_one(inside, out);
                }
            });
        }
    });
    Ok(port)
}

fn relay_one(inside: TcpStream, out: UnixStream) {
    let (Ok(mut inside_r), Ok(mut out_w)) = (inside.try_clone(), out.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut inside_r, &mut out_w);
        let _ = out_w.shutdown(Shutdown::Write);
    });
    let (mut inside_w, mut out_r) = (inside, out);
    let _ = io::copy(&mut out_r, &mut inside_w);
    let _ = inside_w.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// The proxy variables the tools inside read (both cases: curl reads only the lower-case
/// `http_proxy`), pointing at the relay; `NO_PROXY` is dropped, so that nothing goes
/// around it.
pub(crate) fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .map(|k| (k.to_string(), url.clone()))
    .collect()
}

/// The variables that would let a tool go around the proxy.
pub(crate) const AROUND_THE_PROXY: &[&str] = &["NO_PROXY", "no_proxy"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_host_passes_on_its_port_and_nothing_else_does() {
        let allowed = Allowed::new(["api.anthropic.com", "127.0.0.1:8080", "[::1]:443"]);
        assert!(allowed.permits("api.anthropic.com", 443));
        assert!(allowed.permits("api.anthropic.com", 80));
        assert!(allowed.permits("127.0.0.1", 8080));
        assert!(!allowed.permits("127.0.0.1", 8081));
        assert!(allowed.permits("::1", 443));
        assert!(!allowed.permits("evil.example", 443));
        assert!(!allowed.permits("anthropic.com", 443));
    }

    #[test]
    fn connect_and_absolute_requests_are_read() {
        assert_eq!(
            Request::parse("CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x"),
            Some(Request {
                host: "api.anthropic.com".into(),
                port: 443,
                forward: None
            })
        );
        let plain = Request::parse(
            "GET http://127.0.0.1:9/v1/messages?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n",
        )
        .unwrap();
        assert_eq!((plain.host.as_str(), plain.port), ("127.0.0.1", 9));
        assert_eq!(
            plain.forward.unwrap(),
            "GET /v1/messages?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"
        );
        assert_eq!(
            Request::parse("GET http://Example.com HTTP/1.1\r\n")
                .unwrap()
                .host,
            "example.com"
        );
        assert_eq!(Request::parse("GET /relative HTTP/1.1\r\n"), None);
        assert_eq!(Request::parse("CONNECT nohost HTTP/1.1\r\n"), None);
    }
}
