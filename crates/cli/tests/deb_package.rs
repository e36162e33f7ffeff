//! The Debian package, built by `scripts/package-deb.sh` from this build's
//! binary, installed with `dpkg -i` on this machine, checked, started as
//! its service user through the systemd notification protocol, upgraded in
//! place with an edited conffile kept, and removed and purged without a
//! trace (the `pivgate` user too when this test created it). The unit is
//! checked by `systemd-analyze verify` and rated by `systemd-analyze
//! security` at most "OK". Needs root and dpkg, like the package.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn user_exists() -> bool {
    Command::new("getent")
        .args(["passwd", "pivgate"])
        .output()
        .unwrap()
        .status
        .success()
}

fn installed() -> bool {
    let o = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "pivgate"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).contains("install ok installed")
}

/// Purges the package, and removes the user when this test made it, even
/// when an assertion failed.
struct Cleanup {
    remove_user: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "pivgate"]).output();
        if self.remove_user {
            let _ = Command::new("userdel").arg("pivgate").output();
            let _ = Command::new("groupdel").arg("pivgate").output();
        }
    }
}

/// The overall exposure `systemd-analyze security` gives `unit`: the
/// number and the level word.
fn exposure(unit: &Path) -> (f64, String) {
    let o = run(Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(unit));
    let all = text(&o);
    let line = all
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("{all}"));
    let after = line
        .split(':')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>();
    (after[0].parse().unwrap(), after[1].to_string())
}

#[test]
fn the_package_installs_serves_upgrades_and_purges_cleanly() {
    assert_eq!(
        rustix_uid(),
        0,
        "installing a Debian package needs root (CI runs the tests as root)"
    );
    assert!(
        !installed(),
        "a pivgate package is installed on this machine already; this test would replace it"
    );
    let work = tempfile::tempdir().unwrap();
    let out = run(Command::new(root().join("scripts/package-deb.sh"))
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_pivgate"))
        .arg("--out")
        .arg(work.path())
        .arg("--fast"));
    let deb = PathBuf::from(text(&out).trim());
    assert!(deb.exists(), "{deb:?}");

    // What it holds.
    let contents = text(&run(Command::new("dpkg-deb").arg("--contents").arg(&deb)));
    for path in [
        "./usr/bin/pivgate",
        "./lib/systemd/system/pivgate.service",
        "./etc/pivgate/pivgate.toml",
        "./usr/share/man/man1/pivgate.1.gz",
        "./usr/share/man/man1/pivgate-serve.1.gz",
    ] {
        assert!(contents.contains(path), "{path} missing:\n{contents}");
    }
    let conffiles = text(&run(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("conffiles")));
    assert_eq!(conffiles.trim(), "/etc/pivgate/pivgate.toml");

    let _cleanup = Cleanup {
        remove_user: !user_exists(),
    };
    run(Command::new("dpkg").arg("-i").arg(&deb));
    assert!(installed());
    assert!(user_exists());
    let state = std::fs::metadata("/var/lib/pivgate").unwrap();
    assert_eq!(state.permissions().mode() & 0o7777, 0o750);
    let owner = text(&run(Command::new("stat").args([
        "-c",
        "%U:%G",
        "/var/lib/pivgate",
    ])));
    assert_eq!(owner.trim(), "pivgate:pivgate");
    let conf_mode = std::fs::metadata("/etc/pivgate/pivgate.toml").unwrap();
    assert_eq!(conf_mode.permissions().mode() & 0o777, 0o640);
    let man = text(&run(Command::new("man").args(["-w", "pivgate-serve"])));
    assert!(
        man.contains("/usr/share/man/man1/pivgate-serve.1.gz"),
        "{man}"
    );

    // The unit as systemd reads it, with the binary and pages installed.
    let verify = run(
        Command::new("systemd-analyze").args(["verify", "/lib/systemd/system/pivgate.service"])
    );
    let complaints = String::from_utf8_lossy(&verify.stderr);
    assert!(
        !complaints.contains("pivgate.service"),
        "systemd-analyze verify: {complaints}"
    );
    let (score, level) = exposure(Path::new("/lib/systemd/system/pivgate.service"));
    println!("systemd-analyze security pivgate.service: {score} {level}");
    assert!(
        ["PERFECT", "SAFE", "OK"].contains(&level.as_str()),
        "exposure {score} {level}"
    );

    // The installed binary, as the service user, with the packaged
    // configuration (on a free port): ready through NOTIFY_SOCKET, its
    // database in /var/lib/pivgate.
    serve_as_service_user(work.path());
    assert!(Path::new("/var/lib/pivgate/pivgate.db").exists());

    // An upgrade (the same package again) keeps an edited conffile and the
    // data.
    let edited = std::fs::read_to_string("/etc/pivgate/pivgate.toml")
        .unwrap()
        .replace("unlock_ms = 5000", "unlock_ms = 7000");
    std::fs::write("/etc/pivgate/pivgate.toml", &edited).unwrap();
    run(Command::new("dpkg")
        .args(["-i", "--force-confold"])
        .arg(&deb));
    assert_eq!(
        std::fs::read_to_string("/etc/pivgate/pivgate.toml").unwrap(),
        edited
    );
    assert!(Path::new("/var/lib/pivgate/pivgate.db").exists());

    // Removed: the program goes, the configuration and data stay.
    run(Command::new("dpkg").args(["--remove", "pivgate"]));
    assert!(!Path::new("/usr/bin/pivgate").exists());
    assert!(!Path::new("/lib/systemd/system/pivgate.service").exists());
    assert!(!Path::new("/usr/share/man/man1/pivgate.1.gz").exists());
    assert!(Path::new("/etc/pivgate/pivgate.toml").exists());
    assert!(Path::new("/var/lib/pivgate/pivgate.db").exists());

    // Purged: nothing left.
    run(Command::new("dpkg").args(["--purge", "pivgate"]));
    for gone in [
        "/etc/pivgate",
        "/var/lib/pivgate",
        "/etc/systemd/system/pivgate.service",
        "/etc/systemd/system/multi-user.target.wants/pivgate.service",
        "/var/lib/systemd/deb-systemd-helper-enabled/pivgate.service.dsh-also",
        "/var/lib/systemd/deb-systemd-helper-masked/pivgate.service",
    ] {
        assert!(!Path::new(gone).exists(), "{gone} left after purge");
    }
    assert!(!installed());
}

fn rustix_uid() -> u32 {
    let o = run(Command::new("id").arg("-u"));
    text(&o).trim().parse().unwrap()
}

/// Runs `/usr/bin/pivgate serve` as `pivgate` (as systemd would) with the packaged
/// configuration moved to a free port, waits for READY=1 on a socket this
/// test owns, expects WATCHDOG=1 pings, stops it with SIGTERM and expects STOPPING=1
/// and exit 0.
fn serve_as_service_user(work: &Path) {
    let sock_dir = work.join("notify");
    std::fs::create_dir(&sock_dir).unwrap();
    std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = sock_dir.join("notify.sock");
    let rx = UnixDatagram::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let config = "/var/lib/pivgate/check.toml";
    let text = std::fs::read_to_string("/etc/pivgate/pivgate.toml")
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    std::fs::write(config, text).unwrap();
    run(Command::new("chown").args(["pivgate:pivgate", config]));
    // setpriv executes the service in its own place (no parent in between
    // to forward signals).
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=pivgate",
            "--regid=pivgate",
            "--init-groups",
            "/usr/bin/pivgate",
            "serve",
            "--config",
            config,
        ])
        .env("NOTIFY_SOCKET", &sock)
        .env("WATCHDOG_USEC", "200000")
        .env_remove("WATCHDOG_PID")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let ready = loop {
        match rx.recv(&mut buf) {
            Ok(n) => {
                let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                let done = m.contains("READY=1") || m.contains("STATUS=failed");
                seen.push(m);
                if done {
                    break seen.last().unwrap().contains("READY=1");
                }
            }
            Err(e) => panic!("no READY=1 ({e}); seen {seen:?}"),
        }
    };
    if !ready {
        let _ = child.kill();
        let o = child.wait_with_output().unwrap();
        panic!("{seen:?}\n{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(seen[0].starts_with("STATUS=starting"), "{seen:?}");
    assert!(
        seen.last().unwrap().contains("STATUS=ready: serving"),
        "{seen:?}"
    );
    // With WatchdogSec= (WATCHDOG_USEC) and no tap stuck, pings follow.
    let n = rx.recv(&mut buf).expect("no WATCHDOG=1");
    assert_eq!(&buf[..n], b"WATCHDOG=1\n");
    run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    let stopping = loop {
        let n = rx.recv(&mut buf).expect("no STOPPING=1");
        let m = String::from_utf8_lossy(&buf[..n]).into_owned();
        if m.contains("STOPPING=1") {
            break m;
        }
    };
    assert!(stopping.contains("STATUS=stopping"), "{stopping}");
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(config).unwrap();
}
