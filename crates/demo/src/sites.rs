//! `pivgate demo --sites`: a central on a temporary PostgreSQL cluster and
//! two sites on SQLite (`server::demo_sites`), narrated: both sites follow
//! the central; a suspension at the central refuses the card at both
//! sites, with the time it took to be in force at each; south is cut off
//! from the central, keeps deciding on what it holds while the central
//! suspends another card, and catches up once reconnected (how long), its
//! taps from the cut reaching the central.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use card::Card;
use host::InProcess;
use server::demo_sites::{SitesDemo, SITES};
use server::door::TapResult;

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn tap_line(site: &str, who: &str, r: &TapResult) -> String {
    let verdict = if r.granted() { "granted" } else { "refused" };
    format!(
        "   {site}: {who} {verdict} at the {site} door ({})",
        r.code()
    )
}

/// Runs the many-sites demo; `Ok(Err(what))` when a step ended otherwise
/// than it should.
pub fn run_sites() -> Result<Result<(), Vec<String>>> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    eprintln!("pivgate demo --sites: a central on PostgreSQL and two sites on SQLite");
    eprintln!(
        "  starting a temporary PostgreSQL cluster, the central and sites {} and {} in {}",
        SITES[0],
        SITES[1],
        dir.path().display()
    );
    let demo = SitesDemo::start(
        dir.path(),
        Box::new(|c| {
            let image = c.card_image(Some(5))?;
            Ok(Box::new(InProcess::new(Card::new(image))) as Box<dyn host::Transport + Send>)
        }),
    )?;
    let mut wrong = Vec::new();
    let mut expect = |ok: bool, what: &str| {
        if !ok {
            wrong.push(what.to_string());
        }
    };
    println!(
        "central: pivgate on PostgreSQL with [sites]; sites {} and {}: pivgate on SQLite with [central], \
         mutual TLS on loopback ({} through a proxy this demo controls)",
        SITES[0], SITES[1], SITES[1]
    );
    println!();

    println!("── 1. both sites follow the central");
    for (i, s) in SITES.iter().enumerate() {
        let pos = demo.caught_up(i)?;
        let r = demo.tap(i, &demo.alice)?;
        println!("   {s}: its part applied up to feed position {pos}");
        println!("{}", tap_line(s, "Alice", &r));
        expect(r.granted(), "Alice granted at both sites");
    }
    println!();

    println!("── 2. a suspension at the central");
    let (at, pos) = demo.set_status("Alice", false)?;
    println!("   Alice suspended at the central (card reported lost)");
    for (i, s) in SITES.iter().enumerate() {
        let took = demo.in_force(i, pos[i], at)?;
        println!("   {s}: suspension in force after {}", ms(took));
        let r = demo.tap(i, &demo.alice)?;
        println!("{}", tap_line(s, "Alice", &r));
        expect(
            r.code() == "cardholder-suspended",
            "Alice refused at both sites after the suspension",
        );
    }
    println!();

    println!("── 3. {} cut off from the central", SITES[1]);
    demo.south_link.set_cut(true);
    demo.disconnected(1)?;
    println!("   the proxy cuts {}'s link; it keeps deciding", SITES[1]);
    let (at, pos) = demo.set_status("Bob", false)?;
    println!(
        "   Bob suspended at the central while {} is cut off",
        SITES[1]
    );
    let took = demo.in_force(0, pos[0], at)?;
    let r = demo.tap(0, &demo.bob)?;
    println!("   {}: suspension in force after {}", SITES[0], ms(took));
    println!("{}", tap_line(SITES[0], "Bob", &r));
    expect(
        r.code() == "cardholder-suspended",
        "Bob refused at the connected site",
    );
    let mut offline_taps = 0;
    let mut last = 0;
    for _ in 0..3 {
        let r = demo.tap(1, &demo.bob)?;
        offline_taps += 1;
        last = r.event.as_ref().map_or(last, |e| e.0);
        if offline_taps == 1 {
            println!("{}", tap_line(SITES[1], "Bob", &r));
        }
        expect(
            r.granted(),
            "Bob still granted at the cut-off site (it cannot know)",
        );
    }
    println!(
        "   {}: {offline_taps} taps decided while cut off, on the data it holds",
        SITES[1]
    );
    println!();

    println!("── 4. {} reconnected", SITES[1]);
    let back = Instant::now();
    demo.south_link.set_cut(false);
    let took = demo.in_force(1, pos[1], back)?;
    println!(
        "   {}: caught up after {} (feed position {})",
        SITES[1],
        ms(took),
        pos[1]
    );
    let r = demo.tap(1, &demo.bob)?;
    println!("{}", tap_line(SITES[1], "Bob", &r));
    expect(
        r.code() == "cardholder-suspended",
        "Bob refused at the reconnected site",
    );
    let taps = demo.uploaded(1, last)?;
    let took_up = back.elapsed();
    println!(
        "   {}: its events up to its last tap (#{last}) at the central after {} ({taps} taps from {} held there)",
        SITES[1],
        ms(took_up),
        SITES[1]
    );
    expect(taps > offline_taps, "the cut-off site's taps uploaded");
    println!();

    demo.shutdown()?;
    if wrong.is_empty() {
        println!(
            "outcome: the suspensions were in force at every connected site within the fan-out time; \
             the cut-off site kept deciding and caught up once reconnected"
        );
        Ok(Ok(()))
    } else {
        Ok(Err(wrong))
    }
}
