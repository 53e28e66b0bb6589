//! End-to-end behaviour of `default-path` (configuration.txt §3.1): the relative names of
//! files the configuration reads (an error file, a map) resolve from the configuration's
//! directory (`config`), its parent (`parent`) or a given one (`origin`), whatever directory
//! the process starts in; without it, from the starting directory.
#![allow(clippy::unwrap_used)]

mod common;

use common::http::{HTTP_DEFAULTS, one_shot, status_of};
use common::{fd_bind, frontend, sluice};

/// Starts Sluice from the test's directory with `global_line` and a frontend naming
/// `errorfile` and `map`, after writing those two files under the process's temporary
/// directory (which holds the configuration) at `pages/503.http` and `maps/m.map`. In the
/// three strings, `{dir}` is that directory and `{name}` its last component. Returns the body
/// of the 503 page and the value the map gave a request for `/a`.
fn run(global_line: &str, errorfile: &str, map: &str) -> (String, String) {
    let (listener, addr) = frontend();
    let bind = fd_bind(&listener);
    let builder = sluice("").inherit(listener);
    let dir = builder.dir().path().to_owned();
    std::fs::create_dir_all(dir.join("pages")).unwrap();
    std::fs::create_dir_all(dir.join("maps")).unwrap();
    std::fs::write(
        dir.join("pages/503.http"),
        "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nfrom\n",
    )
    .unwrap();
    std::fs::write(dir.join("maps/m.map"), "/a found\n").unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let fill = |text: &str| {
        text.replace("{dir}", &dir.display().to_string())
            .replace("{name}", &name)
    };
    let (global_line, errorfile, map) = (fill(global_line), fill(errorfile), fill(map));
    let config = format!(
        "global\n    {global_line}\n{HTTP_DEFAULTS}\nfrontend fe\n    bind {bind}\n    errorfile 503 {errorfile}\n    http-request return status 200 hdr x-m %[path,map({map},none)] if {{ path /a }}\n    default_backend empty\nbackend empty\n"
    );
    let _proxy = builder.config(&config).start();
    let page = one_shot(
        addr,
        b"GET /b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(page.data()), 503);
    let mapped = one_shot(
        addr,
        b"GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let page = String::from_utf8_lossy(page.data()).into_owned();
    let body = page.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    let field = String::from_utf8_lossy(mapped.data())
        .lines()
        .find_map(|l| l.strip_prefix("x-m: ").map(str::to_owned));
    (body.unwrap_or_default(), field.unwrap_or_default())
}

#[test]
fn config_reads_relative_names_from_the_configuration_directory() {
    let got = run("default-path config", "pages/503.http", "maps/m.map");
    assert_eq!(got, ("from\n".to_owned(), "found".to_owned()));
}

#[test]
fn parent_reads_them_from_the_parent_of_the_configuration_directory() {
    let got = run(
        "default-path parent",
        "{name}/pages/503.http",
        "{name}/maps/m.map",
    );
    assert_eq!(got, ("from\n".to_owned(), "found".to_owned()));
}

#[test]
fn origin_reads_them_from_the_given_directory() {
    let got = run(
        "default-path origin {dir}/pages",
        "503.http",
        "../maps/m.map",
    );
    assert_eq!(got, ("from\n".to_owned(), "found".to_owned()));
}

/// Without `default-path` (or with `current`), the names are relative to the directory the
/// process starts in: here, the test's, where they are not.
#[test]
fn current_reads_them_from_the_starting_directory() {
    let dir = common::TempDir::new();
    std::fs::create_dir_all(dir.join("pages")).unwrap();
    std::fs::write(dir.join("pages/503.http"), "HTTP/1.0 503 x\r\n\r\n").unwrap();
    let config = format!(
        "global\n    default-path config\n    default-path current\n{HTTP_DEFAULTS}\nfrontend fe\n    bind 127.0.0.1:0\n    errorfile 503 pages/503.http\n"
    );
    let cfg = dir.write("current.cfg", &config);
    let out = common::run(&["-c", "-f", cfg.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("'pages/503.http'"), "{stderr}");
}
