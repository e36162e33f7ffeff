//! Fuzzes the card-image loader (the JSON file format of `IMAGE.md`) with a
//! save/load round trip.
//!
//! The input is the content of an image file. Loading must never panic;
//! whatever loads must survive the round trip unchanged: serialised and
//! parsed again, and saved to disk and loaded again, it is the same image,
//! and its serialisation is stable. A card running it answers SELECT.

#![no_main]

use card::image::CardImage;
use card::Card;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// One image path per fuzzing process, in a private directory.
fn image_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pivgate-fuzz-image-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        dir.join("card.json")
    })
}

fuzz_target!(|data: &[u8]| {
    let path = image_path();
    // The file loader: bytes on disk, not only valid UTF-8.
    std::fs::write(path, data).expect("write the input");
    let from_file = CardImage::load(path);
    let from_text = std::str::from_utf8(data)
        .map_err(|_| ())
        .and_then(|t| CardImage::from_json(t).map_err(|_| ()));
    assert_eq!(
        from_file.is_ok(),
        from_text.is_ok(),
        "file and text loaders disagree"
    );
    let Ok(image) = from_file else {
        return;
    };
    assert_eq!(from_text.ok().as_ref(), Some(&image));

    let json = image.to_json();
    let again = CardImage::from_json(&json).expect("a serialised image loads");
    assert_eq!(again, image, "JSON round trip changed the image");
    assert_eq!(*again.to_json(), *json, "serialisation is not stable");

    image.save(path).expect("save");
    let loaded = CardImage::load(path).expect("a saved image loads");
    assert_eq!(loaded, image, "disk round trip changed the image");

    let mut card = Card::new(loaded);
    let answer = card.process(&[0x00, 0xA4, 0x04, 0x00, 0x05, 0xA0, 0x00, 0x00, 0x03, 0x08]);
    assert_eq!(&answer[answer.len() - 2..], &[0x90, 0x00]);
});
