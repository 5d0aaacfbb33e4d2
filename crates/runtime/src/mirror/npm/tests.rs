use serde_json::json;

use super::*;

#[test]
fn scoped_names_become_two_directories_and_one_escaped_segment() {
    assert!(valid_name("left-pad"));
    assert!(valid_name("@types/node"));
    for bad in [
        "", "..", "@types", "@/x", "@a/", "a/b", ".hidden", "_x", "@a/../b", "a b",
    ] {
        assert!(!valid_name(bad), "{bad:?}");
    }
    assert_eq!(escaped("@types/node"), "@types%2fnode");
    assert_eq!(escaped("chalk"), "chalk");
    assert_eq!(
        tarball_rel("@types/node", "20.1.0"),
        "npm/@types/node/-/node-20.1.0.tgz"
    );
    assert_eq!(tarball_rel("chalk", "5.3.0"), "npm/chalk/-/chalk-5.3.0.tgz");
    assert_eq!(packument_rel("@s/n"), "npm/@s/n/index.json");
}

#[test]
fn requests_map_to_files_and_nothing_outside() {
    assert_eq!(
        resolve_request("/@s/n"),
        Some(("npm/@s/n/index.json".into(), "application/json"))
    );
    assert_eq!(
        resolve_request("/chalk/"),
        Some(("npm/chalk/index.json".into(), "application/json"))
    );
    assert_eq!(
        resolve_request("/@s/n/-/n-1.0.0.tgz"),
        Some(("npm/@s/n/-/n-1.0.0.tgz".into(), "application/octet-stream"))
    );
    for bad in [
        "/",
        "/../lock.json",
        "/a/-/../../lock.json",
        "/a/-/x.json",
        "/a/b",
        "x",
        // Found by the fuzz pass (a percent-decoded request for a tarball).
        "/lodash/-/l\0\0\0\0\0\0\0\u{fffd}17.21.tgz",
        "/a/-/a\\..\\b.tgz",
        "/a/-/a b.tgz",
    ] {
        assert_eq!(resolve_request(bad), None, "{bad:?}");
    }
    assert_eq!(
        crate::mirror::serve::percent_decode("/@s%2fn?write=true"),
        "/@s/n?write=true"
    );
    assert_eq!(crate::mirror::serve::percent_decode("/a%2"), "/a%2");
}

#[test]
fn latest_is_the_highest_release_else_the_highest_prerelease() {
    assert_eq!(
        latest(["1.2.0", "1.10.0", "2.0.0-rc.1", "1.9.9"]).as_deref(),
        Some("1.10.0")
    );
    assert_eq!(
        latest(["2.0.0-rc.1", "2.0.0-beta.3"]).as_deref(),
        Some("2.0.0-rc.1")
    );
    assert_eq!(latest(["not-semver"]), None);
}

fn doc() -> serde_json::Value {
    json!({
        "name": "dep",
        "dist-tags": {"latest": "2.0.0", "next": "3.0.0-rc.1"},
        "time": {"created": "2019-01-01T00:00:00.000Z", "modified": "2024-01-01T00:00:00.000Z",
                 "1.0.0": "2020-01-01T00:00:00.000Z", "1.1.0": "2021-01-01T00:00:00.000Z",
                 "2.0.0": "2023-01-01T00:00:00.000Z", "3.0.0-rc.1": "2021-06-01T00:00:00.000Z"},
        "versions": {"1.0.0": {"version": "1.0.0"}, "1.1.0": {"version": "1.1.0"},
                     "2.0.0": {"version": "2.0.0"}, "3.0.0-rc.1": {"version": "3.0.0-rc.1"},
                     "9.9.9": {"version": "9.9.9"}},
    })
}

#[test]
fn cut_keeps_versions_published_by_the_date_and_recomputes_latest() {
    let date = crate::determinism::date::parse_date("2022-01-01").unwrap();
    let c = cut(&doc(), date);
    let versions: Vec<&String> = c["versions"].as_object().unwrap().keys().collect();
    // 9.9.9 has no time: nothing proves it existed.
    assert_eq!(versions, ["1.0.0", "1.1.0", "3.0.0-rc.1"]);
    assert_eq!(c["dist-tags"], json!({"latest": "1.1.0"}));
    let times: Vec<&String> = c["time"].as_object().unwrap().keys().collect();
    assert_eq!(times, ["1.0.0", "1.1.0", "3.0.0-rc.1"]);
    let later = cut(
        &doc(),
        crate::determinism::date::parse_date("2024-01-01").unwrap(),
    );
    assert_eq!(later["dist-tags"]["latest"], "2.0.0");
    let before = cut(
        &doc(),
        crate::determinism::date::parse_date("2019-06-01").unwrap(),
    );
    assert_eq!(before["versions"], json!({}));
    assert_eq!(before["dist-tags"], json!({}));
}

fn record(name: &str, version: &str) -> NpmRecord {
    NpmRecord {
        name: name.into(),
        version: version.into(),
        time: "2020-01-01T00:00:00.000Z".into(),
        integrity: "sha512-AAAA".into(),
        shasum: "ab".repeat(20),
        size: 10,
        manifest: manifest_of(&json!({
            "name": name, "version": version, "dependencies": {"x": "^1"},
            "scripts": {"test": "no"}, "readme": "long", "bin": {"b": "b.js"},
        })),
    }
}

#[test]
fn packuments_are_generated_deterministically_from_the_records() {
    let a = [
        record("@s/n", "1.0.0"),
        record("dep", "1.0.0"),
        record("dep", "1.1.0"),
    ];
    let t = tree(&a);
    let paths: Vec<&str> = t.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["npm/@s/n/index.json", "npm/dep/index.json"]);
    let scoped: serde_json::Value = serde_json::from_slice(&t[0].1).unwrap();
    assert_eq!(
        scoped["versions"]["1.0.0"]["dist"]["tarball"],
        "http://127.0.0.1:4873/@s/n/-/n-1.0.0.tgz"
    );
    assert_eq!(
        scoped["versions"]["1.0.0"]["dependencies"],
        json!({"x": "^1"})
    );
    assert!(scoped["versions"]["1.0.0"].get("scripts").is_none());
    assert!(scoped["versions"]["1.0.0"].get("readme").is_none());
    let dep: serde_json::Value = serde_json::from_slice(&t[1].1).unwrap();
    assert_eq!(dep["dist-tags"]["latest"], "1.1.0");
    assert_eq!(dep["versions"]["1.1.0"]["dist"]["integrity"], "sha512-AAAA");
    let mut b = a.clone();
    b.reverse();
    assert_eq!(tree(&b), t);
}

#[test]
fn lockfiles_name_their_registry_packages() {
    let lock = json!({
        "name": "app", "lockfileVersion": 3,
        "packages": {
            "": {"name": "app", "dependencies": {"dep": "^1"}},
            "node_modules/dep": {"version": "1.1.0", "resolved": "https://r/dep/-/dep-1.1.0.tgz",
                                 "integrity": "sha512-x"},
            "node_modules/@s/n": {"version": "1.0.0", "resolved": "https://r/@s/n/-/n-1.0.0.tgz"},
            "node_modules/@s/n/node_modules/dep": {"version": "1.0.0"},
            "node_modules/other/node_modules/dep": {"version": "1.1.0"},
            "node_modules/alias": {"name": "dep", "version": "2.0.0"},
            "node_modules/ws": {"resolved": "packages/ws", "link": true},
            "packages/ws": {"version": "0.0.1"},
            "node_modules/b/node_modules/inside": {"version": "1.0.0", "inBundle": true},
        }
    });
    let got = lockfile::parse(&lock.to_string()).unwrap();
    let ids: Vec<String> = got
        .iter()
        .map(|l| format!("{}@{}", l.name, l.version))
        .collect();
    assert_eq!(ids, ["@s/n@1.0.0", "dep@1.0.0", "dep@1.1.0", "dep@2.0.0"]);
    assert_eq!(got[2].integrity.as_deref(), Some("sha512-x"));
}

#[test]
fn lockfiles_that_cannot_be_mirrored_say_why() {
    let err = |v: serde_json::Value| lockfile::parse(&v.to_string()).unwrap_err();
    assert!(err(json!({"lockfileVersion": 1, "dependencies": {}})).contains("npm 7"));
    assert!(err(json!({"name": "x"})).contains("lockfileVersion"));
    let git = json!({"lockfileVersion": 3, "packages": {"node_modules/g": {
        "version": "1.0.0", "resolved": "git+ssh://git@github.com/a/g.git#abc"}}});
    assert!(err(git).contains("g@1.0.0 is resolved from git+ssh"));
    let evil =
        json!({"lockfileVersion": 3, "packages": {"node_modules/x": {"version": "../../x"}}});
    assert!(err(evil).contains("not a registry version"));
    assert!(lockfile::parse("{").unwrap_err().starts_with("not JSON"));
}

#[test]
fn npm_errors_keep_the_reason() {
    let stderr = b"npm error code ETARGET\nnpm error notarget No matching version found for dep@^3.0.0.\nnpm error notarget In most cases you or one of your dependencies are requesting\nnpm error A complete log of this run can be found in: /x.log\n";
    assert_eq!(
        pull::npm_error(stderr),
        "notarget No matching version found for dep@^3.0.0."
    );
}

#[test]
fn pypi_requests_are_negotiated_and_kept_inside() {
    use crate::mirror::serve::pypi_request;
    let uv = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";
    assert_eq!(
        pypi_request("/pypi/simple/alpha/", uv),
        Some((
            "pypi/simple/alpha/index.json".into(),
            "application/vnd.pypi.simple.v1+json"
        ))
    );
    assert_eq!(
        pypi_request("/pypi/simple/alpha/", "text/html"),
        Some(("pypi/simple/alpha/index.html".into(), "text/html"))
    );
    assert_eq!(
        pypi_request("/pypi/simple/", ""),
        Some(("pypi/simple/index.html".into(), "text/html"))
    );
    assert_eq!(
        pypi_request("/pypi/files/a-1.0-py3-none-any.whl", ""),
        Some((
            "pypi/files/a-1.0-py3-none-any.whl".into(),
            "application/octet-stream"
        ))
    );
    for bad in [
        "/pypi/files/../lock.json",
        "/pypi/simple/../../lock.json",
        "/pypi/files/",
        "/pypi/x",
    ] {
        assert_eq!(pypi_request(bad, ""), None, "{bad:?}");
    }
}

/// The mirror server's reading of a request: what follows the head is not a header, and only
/// GET and HEAD are served.
#[test]
fn request_heads_are_read_up_to_their_blank_line() {
    use crate::mirror::serve::{head_complete, parse_head};
    let head = b"GET /pypi/simple/a/?x=1 HTTP/1.1\r\nHost: m\r\n\r\nAccept: application/vnd.pypi.simple.v1+json\r\n";
    assert!(head_complete(head));
    let r = parse_head(head).unwrap();
    assert_eq!(
        (r.method, r.path.as_str(), r.accept.as_str()),
        ("GET", "/pypi/simple/a/", "")
    );
    let r = parse_head(b"GET / HTTP/1.1\nAccept: text/html\n\n").unwrap();
    assert_eq!(r.accept, "text/html");
    let r = parse_head(b"HEAD /@s%2fn HTTP/1.1\n\n").unwrap();
    assert_eq!(
        (r.method, r.path.as_str(), r.accept.as_str()),
        ("HEAD", "/@s/n", "")
    );
    assert_eq!(parse_head(b"POST /a HTTP/1.1\r\n\r\n"), None);
    assert!(!head_complete(b"GET / HTTP/1.1\r\n"));
}
