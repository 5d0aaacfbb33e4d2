use super::*;

fn context() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("Dockerfile"),
        "FROM busybox\nCOPY app /app\nRUN true\n",
    )
    .unwrap();
    std::fs::create_dir_all(d.join("app/sub")).unwrap();
    std::fs::write(d.join("app/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(d.join("app/sub/data"), "1").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.join("app/link")).unwrap();
    dir
}

#[test]
fn the_key_follows_the_dockerfile_and_every_byte_of_the_context() {
    let dir = context();
    let d = dir.path();
    let df = d.join("Dockerfile");
    let k0 = key(&df, d).unwrap();
    assert_eq!(key(&df, d).unwrap(), k0, "the key is stable");
    let changes: [(&str, &dyn Fn()); 5] = [
        ("a file's bytes", &|| {
            std::fs::write(d.join("app/sub/data"), "2").unwrap()
        }),
        ("the executable bit", &|| {
            use std::os::unix::fs::PermissionsExt;
            let p = d.join("app/run.sh");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }),
        ("a link's target (never followed)", &|| {
            std::fs::remove_file(d.join("app/link")).unwrap();
            std::os::unix::fs::symlink("/etc/group", d.join("app/link")).unwrap();
        }),
        ("a new empty directory", &|| {
            std::fs::create_dir(d.join("app/empty")).unwrap()
        }),
        ("the Dockerfile", &|| {
            std::fs::write(d.join("Dockerfile"), "FROM busybox\nRUN false\n").unwrap()
        }),
    ];
    let mut seen = vec![k0];
    for (what, change) in changes {
        change();
        let k = key(&df, d).unwrap();
        assert!(!seen.contains(&k), "{what} did not change the key");
        seen.push(k);
    }
    // A file moved between directories is another context.
    std::fs::rename(d.join("app/sub/data"), d.join("app/data")).unwrap();
    assert!(!seen.contains(&key(&df, d).unwrap()));
}

#[test]
fn the_plan_names_the_engine_commands_and_the_store_name() {
    let dir = context();
    let d = dir.path();
    let req = BuildRequest {
        dockerfile: d.join("Dockerfile"),
        context: d.to_path_buf(),
        engine: Engine::Podman,
        runtime: Some("/usr/local/bin/reprorun".into()),
    };
    let k = key(&req.dockerfile, &req.context).unwrap();
    let p = plan(&req, &k, Path::new("/scratch"), &Ignore::default());
    assert_eq!(p.key, k);
    assert_eq!(p.name, format!("localhost/reprorun-build:{}", p.key.hex()));
    assert!(super::super::name::ImageName::parse(&p.name).is_ok());
    let tag = format!("localhost/reprorun-build:{}", &p.key.hex()[..16]);
    let df = d.join("Dockerfile").display().to_string();
    let ctx = d.display().to_string();
    assert_eq!(
        p.commands,
        vec![
            vec![
                "podman".to_string(),
                "build".into(),
                "--runtime=/usr/local/bin/reprorun".into(),
                // Always: podman would otherwise read a `.containerignore` the key never saw.
                "--ignorefile=/scratch/ignorefile".into(),
                "--tag".into(),
                tag.clone(),
                "--file".into(),
                df.clone(),
                ctx.clone()
            ],
            vec![
                "podman".to_string(),
                "save".into(),
                "--format".into(),
                "oci-archive".into(),
                "--output".into(),
                "/scratch/image.tar".into(),
                tag.clone()
            ]
        ]
    );
    let req = BuildRequest {
        engine: Engine::Docker,
        ..req
    };
    assert_eq!(
        p.ignorefile,
        Some(("/scratch/ignorefile".into(), String::new()))
    );
    let p = plan(&req, &k, Path::new("/scratch"), &Ignore::default());
    assert_eq!(p.ignorefile, None, "Docker reads the context's own file");
    assert_eq!(p.commands[0][..3], ["docker", "build", "--tag"]);
    assert_eq!(p.commands[1][..3], ["docker", "save", "--output"]);
}

#[test]
fn bad_contexts_are_one_line() {
    let dir = context();
    let d = dir.path();
    let e = key(&d.join("nope"), d).unwrap_err().to_string();
    assert!(e.contains("nope") && !e.contains('\n'), "{e}");
    let e = key(&d.join("Dockerfile"), &d.join("Dockerfile"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a directory"), "{e}");
    let e = key(&d.join("Dockerfile"), &d.join("missing"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing"), "{e}");
}

#[test]
fn podman_is_preferred_then_docker() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let path = std::env::join_paths([&a, &b]).unwrap();
    assert_eq!(Engine::detect(Some(&path)), None);
    std::fs::write(b.join("docker"), "").unwrap();
    assert_eq!(Engine::detect(Some(&path)), Some(Engine::Docker));
    std::fs::write(a.join("podman"), "").unwrap();
    assert_eq!(Engine::detect(Some(&path)), Some(Engine::Podman));
    assert_eq!(Engine::detect(None), None);
}

#[test]
fn a_context_file_is_read_only_when_the_fd_is_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("f"), "x").unwrap();
    std::os::unix::fs::symlink(d.join("f"), d.join("link")).unwrap();
    let fifo = std::ffi::CString::new(d.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert!(open_regular(&d.join("f")).is_ok());
    // A link swapped in for a file after the lstat is not followed.
    let err = open_regular(&d.join("link")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
    // A FIFO swapped in neither blocks the open (no writer) nor is read.
    let err = open_regular(&d.join("fifo")).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    std::fs::create_dir(d.join("dir")).unwrap();
    assert!(open_regular(&d.join("dir")).is_err());
}

#[test]
fn what_dockerignore_excludes_is_not_in_the_key_and_podman_reads_that_file() {
    let dir = context();
    let d = dir.path();
    let df = d.join("Dockerfile");
    let k0 = key(&df, d).unwrap();
    std::fs::write(
        d.join(".dockerignore"),
        "app/sub\n**/*.log\n!app/sub/keep\n",
    )
    .unwrap();
    let k1 = key(&df, d).unwrap();
    assert_ne!(k1, k0, "the .dockerignore is part of the context");
    // Files it excludes, at any depth for `**`, change nothing.
    std::fs::write(d.join("app/sub/data"), "changed").unwrap();
    std::fs::write(d.join("build.log"), "x").unwrap();
    std::fs::create_dir_all(d.join("app/sub/deep")).unwrap();
    std::fs::write(d.join("app/sub/deep/x.log"), "x").unwrap();
    assert_eq!(key(&df, d).unwrap(), k1);
    // A file an exception takes back, inside an excluded directory, is in it.
    std::fs::write(d.join("app/sub/keep"), "1").unwrap();
    let k2 = key(&df, d).unwrap();
    assert_ne!(k2, k1);
    std::fs::write(d.join("app/sub/keep"), "2").unwrap();
    assert_ne!(key(&df, d).unwrap(), k2);
    // What is not excluded still counts.
    let k3 = key(&df, d).unwrap();
    std::fs::write(d.join("app/run.sh"), "changed").unwrap();
    assert_ne!(key(&df, d).unwrap(), k3);

    let req = BuildRequest {
        dockerfile: df.clone(),
        context: d.to_path_buf(),
        engine: Engine::Podman,
        runtime: None,
    };
    let ignore = read_ignore(d, &mut Sha256::new()).unwrap();
    let p = plan(&req, &k3, Path::new("/scratch"), &ignore);
    let flag = "--ignorefile=/scratch/ignorefile".to_string();
    assert_eq!(p.commands[0][2], flag, "{:?}", p.commands[0]);
    assert_eq!(
        p.ignorefile.as_ref().map(|(_, t)| t.as_str()),
        Some("app/sub\n**/*.log\n!app/sub/keep\n")
    );
    let docker = plan(
        &BuildRequest {
            engine: Engine::Docker,
            ..req
        },
        &k3,
        Path::new("/scratch"),
        &ignore,
    );
    assert!(
        !docker.commands[0].contains(&flag),
        "Docker reads it itself"
    );

    // A bad pattern is one line naming the file and the line.
    std::fs::write(d.join(".dockerignore"), "ok\n!\n").unwrap();
    let e = key(&df, d).unwrap_err().to_string();
    assert!(
        e.contains(".dockerignore line 2") && !e.contains('\n'),
        "{e}"
    );
    // A .dockerignore that is a link is refused, not followed.
    std::fs::remove_file(d.join(".dockerignore")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.join(".dockerignore")).unwrap();
    assert!(key(&df, d).is_err());
}

#[test]
fn the_build_sends_the_dockerignore_its_key_hashed_even_if_the_file_changes() {
    let dir = context();
    let d = dir.path();
    let df = d.join("Dockerfile");
    std::fs::write(d.join(".dockerignore"), "app/sub\n").unwrap();
    let keyed = keyed(&df, d).unwrap();
    assert_eq!(keyed.key, key(&df, d).unwrap());
    // Rewritten after the key was taken: the plan still carries what was hashed.
    std::fs::write(d.join(".dockerignore"), "nothing\n").unwrap();
    let req = BuildRequest {
        dockerfile: df,
        context: d.to_path_buf(),
        engine: Engine::Podman,
        runtime: None,
    };
    let p = plan(&req, &keyed.key, Path::new("/scratch"), &keyed.ignore);
    assert_eq!(
        p.ignorefile.as_ref().map(|(_, t)| t.as_str()),
        Some("app/sub\n")
    );
}
