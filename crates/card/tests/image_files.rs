//! The card image on disk under a crashing writer: saves killed at random
//! points never leave a damaged image, and the next process that locks the
//! image removes the temporary files (holding every secret) they left.

use card::image::{CardImage, ImageLock};
use piv::{Algorithm, KeyRef};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const SAVE_LOOP: &str = "PIVGATE_TEST_SAVE_LOOP";

fn temporaries(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".card.json.tmp-")
        })
        .count()
}

#[test]
fn killed_saves_leave_an_intact_image_and_no_temporary_after_the_next_lock() {
    if let Some(path) = std::env::var_os(SAVE_LOOP) {
        // The child: save for ever, changing the image each time.
        let path = Path::new(&path);
        let mut image = CardImage::load(path).unwrap();
        let mut first = true;
        loop {
            image.serial = image.serial % 1000 + 1;
            image.save(path).unwrap();
            if first {
                // Tell the parent the loop is running.
                println!("saving");
                first = false;
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.json");
    let mut image = CardImage::new_blank(Some(1));
    image
        .generate_key(KeyRef::PivAuth, Algorithm::Rsa2048)
        .unwrap();
    image
        .generate_key(KeyRef::CardAuth, Algorithm::EccP256)
        .unwrap();
    image.save(&path).unwrap();
    let exe = std::env::current_exe().unwrap();
    let (mut kills, mut left) = (0, 0);
    // At least 80 kills, and on until one has left a temporary behind (a
    // slow machine only makes each save, and so the window, longer).
    for i in 0..400u64 {
        if i >= 80 && left > 0 {
            break;
        }
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "killed_saves_leave_an_intact_image_and_no_temporary_after_the_next_lock",
                "--nocapture",
                "--quiet",
            ])
            .env(SAVE_LOOP, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the child is in its save loop, then kill it at a
        // varying moment of a save.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 && !line.contains("saving") {
            line.clear();
        }
        std::thread::sleep(Duration::from_millis(1 + (i * 7) % 13));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        let now = temporaries(dir.path());
        if now > left {
            left = now;
        }
        // Whatever moment the save died at, the image is a whole one.
        let loaded = CardImage::load(&path).unwrap();
        assert_eq!(loaded.keys.len(), 2);
    }
    eprintln!("{kills} saves killed; {left} temporaries left behind");
    // Killed saves do leave temporaries (the window this test is about)...
    assert!(left > 0, "no save was killed between create and rename");
    // ...and the next process taking the image removes them.
    let (loaded, lock) = CardImage::load_locked(&path, "test").unwrap();
    assert_eq!(temporaries(dir.path()), 0);
    assert_eq!(loaded.keys.len(), 2);
    drop(lock);
    let _again = ImageLock::acquire(&path, "test").unwrap();
}

#[test]
fn only_regular_files_of_bounded_size_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("card.json");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // Opening a FIFO for reading would wait for a writer for ever.
    let err = CardImage::load(&fifo).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    let err = CardImage::load(Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot read card image /dev/zero"), "{err}");
    let err = card::image::read_der_or_pem(&fifo, "CERTIFICATE", "certificate")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("cannot read certificate"), "{err}");

    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(card::image::MAX_IMAGE_FILE + 1)
        .unwrap();
    let err = CardImage::load(&big).unwrap_err().to_string();
    assert!(err.contains("more than the"), "{err}");
}
