//! `phantom serve`: a local page where a person drops two dumps and gets `phantom diff`'s inspector. It listens on
//! 127.0.0.1 only and answers only requests addressed to it by that name (no DNS rebinding); uploads are streamed
//! to a temporary directory under a size limit, archives unpack under [`super::archive::Limits`], and each
//! comparison's files are removed once its report is sent. Requests are handled one at a time.

use std::io::Read;
use std::path::{Path, PathBuf};

use tiny_http::{Header, Method, Request, Response, Server};

const PAGE: &str = include_str!("serve.html");

/// What the server needs: the upload limit, and how to run one comparison (A, B, extra options) into HTML.
pub struct Serve<'a> {
    pub port: u16,
    pub max_upload: u64,
    pub run: &'a dyn Fn(&Path, &Path, &str) -> Result<String, String>,
}

fn html(body: String) -> Response<std::io::Cursor<Vec<u8>>> {
    let h = Header::from_bytes("Content-Type", "text/html; charset=utf-8").expect("header");
    Response::from_string(body).with_header(h)
}

fn text(code: u16, body: impl Into<String>) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_string(body.into()).with_status_code(code)
}

fn query<'q>(url: &'q str, key: &str) -> Option<&'q str> {
    url.split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// An uploaded file's name reduced to safe characters, keeping its extension (which decides its format).
fn safe_name(raw: &str) -> String {
    let decoded = raw.replace("%2F", "/").replace("%2f", "/");
    let base = decoded.rsplit('/').next().unwrap_or("");
    let s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "upload".into()
    } else {
        s
    }
}

/// Whether the request is addressed to the loopback by name or address.
fn local(req: &Request) -> bool {
    req.headers()
        .iter()
        .filter(|h| h.field.equiv("Host"))
        .all(|h| {
            let host = h.value.as_str();
            let name = host.rsplit_once(':').map_or(host, |(n, _)| n);
            matches!(name, "127.0.0.1" | "localhost" | "[::1]")
        })
}

struct State {
    root: tempfile::TempDir,
    next: u64,
}

impl State {
    fn session(&self, req: &Request) -> Option<PathBuf> {
        let id: u64 = query(req.url(), "id")?.parse().ok()?;
        let dir = self.root.path().join(id.to_string());
        dir.is_dir().then_some(dir)
    }
}

fn upload(state: &State, req: &mut Request, max: u64) -> Result<String, (u16, String)> {
    let dir = state
        .session(req)
        .ok_or((400, "unknown session".to_string()))?;
    let side = match query(req.url(), "side") {
        Some(s @ ("a" | "b")) => s.to_string(),
        _ => return Err((400, "side must be a or b".into())),
    };
    let name = safe_name(query(req.url(), "name").unwrap_or("upload"));
    if req.body_length().is_some_and(|n| n as u64 > max) {
        return Err((
            413,
            format!("{name} is larger than the {max}-byte limit (phantom serve --max-upload)"),
        ));
    }
    let side_dir = dir.join(&side);
    let _ = std::fs::remove_dir_all(&side_dir);
    std::fs::create_dir_all(&side_dir).map_err(|e| (500, e.to_string()))?;
    let path = side_dir.join(&name);
    let mut f = std::fs::File::create(&path).map_err(|e| (500, e.to_string()))?;
    let n = std::io::copy(&mut req.as_reader().take(max + 1), &mut f)
        .map_err(|e| (400, e.to_string()))?;
    if n > max {
        let _ = std::fs::remove_dir_all(&side_dir);
        return Err((
            413,
            format!("{name} is larger than the {max}-byte limit (phantom serve --max-upload)"),
        ));
    }
    Ok(format!("{n}"))
}

fn the_file(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .next()
}

fn handle(state: &mut State, mut req: Request, s: &Serve) {
    if !local(&req) {
        let _ = req.respond(text(
            403,
            "phantom serve answers requests to 127.0.0.1 or localhost only",
        ));
        return;
    }
    let path = req.url().split('?').next().unwrap_or("").to_string();
    let resp = match (req.method(), path.as_str()) {
        (Method::Get, "/") => {
            html(PAGE.replace("{{limit}}", &crate::units::fmt_size(s.max_upload as usize)))
        }
        (Method::Post, "/session") => {
            state.next += 1;
            match std::fs::create_dir_all(state.root.path().join(state.next.to_string())) {
                Ok(()) => text(200, state.next.to_string()),
                Err(e) => text(500, e.to_string()),
            }
        }
        (Method::Post, "/upload") => match upload(state, &mut req, s.max_upload) {
            Ok(n) => text(200, n),
            Err((code, why)) => text(code, why),
        },
        (Method::Post, "/run") => match state.session(&req) {
            None => text(400, "unknown session"),
            Some(dir) => {
                let mut opts = String::new();
                let _ = req.as_reader().take(4096).read_to_string(&mut opts);
                let files = (the_file(&dir.join("a")), the_file(&dir.join("b")));
                let out = match files {
                    (Some(a), Some(b)) => (s.run)(&a, &b, &opts),
                    _ => Err("upload both A and B first".into()),
                };
                let _ = std::fs::remove_dir_all(&dir);
                match out {
                    Ok(page) => html(page),
                    Err(why) => text(400, why),
                }
            }
        },
        _ => text(404, "not found"),
    };
    let _ = req.respond(resp);
}

/// Serves until the process is stopped; prints the address first (port 0 picks a free one).
pub fn serve(s: &Serve) -> crate::error::Result<()> {
    let server = Server::http(("127.0.0.1", s.port)).map_err(|e| {
        crate::error::Error::Usage(format!(
            "cannot listen on 127.0.0.1:{}: {e} (choose another with --port)",
            s.port
        ))
    })?;
    let addr = server
        .server_addr()
        .to_ip()
        .map(|a| a.to_string())
        .unwrap_or_default();
    println!("phantom serve: http://{addr}/ (Ctrl-C to stop)");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let root = tempfile::tempdir().map_err(|e| {
        crate::error::Error::Usage(format!(
            "cannot create the directory phantom serve keeps uploads in, under {}: {e}\n  hint: set TMPDIR to a \
             writable directory",
            std::env::temp_dir().display()
        ))
    })?;
    let mut state = State { root, next: 0 };
    for req in server.incoming_requests() {
        handle(&mut state, req, s);
    }
    Ok(())
}
