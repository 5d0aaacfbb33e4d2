use super::*;

#[test]
fn usage_message_keeps_the_whole_text_and_names_the_subcommand_help() {
    let clap = "error: the following required arguments were not provided:\n  --out <DIR>\n\n\
Usage: reprorun mirror pull --date <DATE> --out <DIR> <SPEC>...\n\n\
For more information, try '--help'.\n";
    assert_eq!(
        usage_message(clap, "reprorun mirror pull"),
        "reprorun: the following required arguments were not provided:\n  --out <DIR>\n\n\
Usage: reprorun mirror pull --date <DATE> --out <DIR> <SPEC>...\n\n\
For more information, try 'reprorun mirror pull --help'.\n"
    );
}

#[test]
fn command_path_follows_subcommands_past_options() {
    let cmd = clap::Command::new("reprorun")
        .subcommand(clap::Command::new("mirror").subcommand(clap::Command::new("pull")));
    let args = strings(&["reprorun", "mirror", "pull", "--date", "x", "attrs"]);
    assert_eq!(command_path(&cmd, &args), "reprorun mirror pull");
    let args = strings(&["reprorun", "--log", "f", "mirror", "nope"]);
    assert_eq!(command_path(&cmd, &args), "reprorun mirror");
    assert_eq!(command_path(&cmd, &strings(&["reprorun"])), "reprorun");
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn split_value_names_the_option_whose_value_was_split() {
    let takes = |o: &str| o == "--timeout";
    let args = strings(&["--timeout", "10", "minutes", "--", "true"]);
    let hint = split_value(&args, &args[2..], takes).unwrap();
    assert!(hint.contains("`--timeout` took only `10`"), "{hint}");
    assert!(hint.contains("`--timeout '10 minutes'`"), "{hint}");
    // After `--`, with `--opt=value`, after a flag without a value: no hint.
    let args = strings(&["--timeout", "10", "--", "minutes"]);
    assert_eq!(split_value(&args, &args[3..], takes), None);
    let args = strings(&["--timeout=10", "minutes"]);
    assert_eq!(split_value(&args, &args[1..], takes), None);
    let args = strings(&["--dry-run", "x", "minutes"]);
    assert_eq!(split_value(&args, &args[2..], takes), None);
}

#[test]
fn package_clients_are_found_in_the_command_line() {
    let find = |v: &[&str]| package_client(&strings(v));
    assert_eq!(find(&["pip", "install", "requests"]), Some("pip"));
    assert_eq!(find(&["python3", "-m", "pip", "install", "x"]), Some("pip"));
    assert_eq!(
        find(&["sh", "-c", "cd /work && /tmp/v/bin/pip3 install -r r.txt"]),
        Some("pip")
    );
    assert_eq!(find(&["sh", "-c", "go build ./... && ./app"]), Some("go"));
    assert_eq!(find(&["python3", "-c", "print(1)"]), None);
    assert_eq!(find(&["pytest", "-q"]), None);
    let hint = offline_client("uv", "error: Failed to fetch");
    assert!(hint.contains("so `uv` can download nothing"), "{hint}");
    assert!(
        hint.contains("(the output says: \"error: Failed to fetch\")"),
        "{hint}"
    );
}

#[test]
fn on_path_finds_executables_only() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let tool = d.path().join("tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::write(d.path().join("data"), "").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(["relative", d.path().to_str().unwrap()]).unwrap();
    assert_eq!(on_path("tool", &path), Some(tool.clone()));
    assert_eq!(on_path("data", &path), None);
    assert_eq!(on_path("./tool", &path), None);
    assert!(not_found("tool", &tool).contains("--import-tool tool"));
}
