#!/usr/bin/python3
"""make_corpus.py - synthesise a small speaker-verification corpus in VoxCeleb's layout.

    examples/make_corpus.py --out DIR [--speakers 100 --videos 3 --utts 4 --seed 1]
                            [--trials-speakers 20 --trials 2000] [--jobs 2]
                            [--accents de,fr,es,...] [--first-id 10001]

writes
    DIR/wav/idNNNNN/<11-character video id>/NNNNN.wav   16 kHz, mono, 16-bit PCM, 1-4 s
    DIR/trials.txt     a trial list in the official VoxCeleb format ("1 a.wav b.wav"),
                       over the last --trials-speakers speakers (held out from training)
    DIR/README.txt     what the corpus is and how it was made (voices, settings)

Each speaker is an espeak-ng voice: an English accent (en-gb, en-us, en-gb-scotland,
en-gb-x-rp, en-029, ...; --accents picks others, e.g. the German (de), French (fr-fr) or Hindi (hi) voices
reading the English text, for a corpus unlike the demo's), a voice variant (+m1..+m7, +f1..+f5 and a few named ones),
a base pitch (-p) and a speed (-s). Each "video" is a recording session of that
speaker: the pitch and speed jitter a little, and the channel changes (gain, a bass
and treble tilt with sox, a level of background noise). The text is sentences from
the licence texts shipped with Debian (/usr/share/common-licenses), so the corpus
needs nothing from the network. Only the Python standard library is used, plus the
espeak-ng and sox programs (Debian packages espeak-ng and sox).

The output is deterministic: every random choice is drawn from random.Random seeded
by (--seed, speaker, video, utterance), so the same seed gives byte-identical files
whatever the number of --jobs.
"""
import argparse
import array
import glob
import io
import math
import os
import random
import re
import shutil
import subprocess
import sys
import wave
from multiprocessing import Pool

RATE = 16000
# at least 1.1 s: a training crop is 1 s (100 frames) plus the 25 ms analysis window,
# and `ctrain prep` rejects anything shorter than that
MIN_S, MAX_S = 1.1, 4.0

ACCENTS = ["en", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
           "en-029", "en-us-nyc"]
VARIANTS = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5",
            "adam", "Alex", "Andy", "Annie", "belinda", "benjamin", "caleb", "david", "edward",
            "john", "Lee", "linda", "max", "Michael", "paul", "rob", "robert", "steph", "quincy", "Mike"]
TEXT_GLOBS = ["/usr/share/common-licenses/*"]
VIDEO_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def fail(msg):
    sys.stderr.write("make_corpus.py: %s\n" % msg)
    sys.exit(1)


def check_tools():
    for tool, pkg in (("espeak-ng", "espeak-ng"), ("sox", "sox")):
        if shutil.which(tool) is None:
            fail("%s is not installed; install it with `sudo apt-get install %s` (or run `make deps`)" % (tool, pkg))


def available_voices(wanted=None):
    """The accents and variants of our lists that this espeak-ng has; with `wanted`
    (the --accents list), each of those must exist."""
    out = subprocess.run(["espeak-ng", "--voices=en" if wanted is None else "--voices"], capture_output=True, text=True,
                         check=True).stdout
    langs = {line.split()[1] for line in out.splitlines()[1:] if len(line.split()) > 1}
    if wanted is not None:
        missing = [a for a in wanted if a not in langs]
        if missing:
            fail("--accents: espeak-ng has no voice %s (`espeak-ng --voices` lists them)" % ", ".join(missing))
    accents = [a for a in (ACCENTS if wanted is None else wanted) if a in langs]
    out = subprocess.run(["espeak-ng", "--voices=variant"], capture_output=True, text=True, check=True).stdout
    files = {line.split()[-1].split("/")[-1].lower() for line in out.splitlines()[1:] if line.split()}
    variants = [v for v in VARIANTS if v.lower() in files]
    if not accents or not variants:
        fail("espeak-ng has no English voices or no voice variants (is espeak-ng-data installed?)")
    return accents, variants


def load_sentences():
    """Sentences of 3 to 30 plain words from the licence texts, in a fixed order."""
    sentences = []
    for path in sorted(p for g in TEXT_GLOBS for p in glob.glob(g)):
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        text = re.sub(r"[^A-Za-z0-9,.;:!?' ]+", " ", text.replace("\n", " "))
        for s in re.split(r"(?<=[.!?;:])\s+", text):
            words = [w for w in s.split() if re.search(r"[A-Za-z]", w)]
            if 3 <= len(words) <= 30:
                sentences.append(words)
    if len(sentences) < 50:
        fail("found too little text in %s to draw sentences from" % ", ".join(TEXT_GLOBS))
    return sentences


def video_id(rng):
    return "".join(rng.choice(VIDEO_CHARS) for _ in range(11))


def plan(args, accents, variants, sentences):
    """Every utterance as a dict of explicit settings (no randomness left for the workers)."""
    jobs, speakers = [], []
    used = set()
    for s in range(args.speakers):
        r = random.Random("%d:speaker:%d" % (args.seed, s))
        for _ in range(100):   # distinct accent/variant/pitch band combinations where possible
            spk = {"id": "id%05d" % (args.first_id + s), "accent": r.choice(accents), "variant": r.choice(variants),
                   "pitch": r.randint(25, 75), "speed": r.randint(140, 185)}
            key = (spk["accent"], spk["variant"], spk["pitch"] // 10)
            if key not in used:
                break
        used.add(key)
        speakers.append(spk)
        vids = set()
        for v in range(args.videos):
            rv = random.Random("%d:video:%d:%d" % (args.seed, s, v))
            vid = video_id(rv)
            while vid in vids:
                vid = video_id(rv)
            vids.add(vid)
            session = {"pitch": max(0, min(99, spk["pitch"] + rv.randint(-4, 4))),
                       "speed": spk["speed"] + rv.randint(-8, 8),
                       "gain": round(rv.uniform(-4, 2), 2), "bass": round(rv.uniform(-4, 4), 2),
                       "treble": round(rv.uniform(-4, 4), 2), "snr": round(rv.uniform(25, 45), 1)}
            for u in range(args.utts):
                ru = random.Random("%d:utt:%d:%d:%d" % (args.seed, s, v, u))
                # words for a 1.4 - 3.4 s utterance at this speed (words per second = speed / 60)
                n_words = max(2, round(ru.uniform(1.4, 3.4) * session["speed"] / 60.0))
                k = ru.randrange(len(sentences))
                words = []
                while len(words) < n_words:
                    words += sentences[k % len(sentences)]
                    k += 1
                jobs.append({"path": os.path.join(spk["id"], vid, "%05d.wav" % (u + 1)),
                             "voice": "%s+%s" % (spk["accent"], spk["variant"]),
                             "text": " ".join(words[:n_words]), "pitch": session["pitch"] + ru.randint(-2, 2),
                             "speed": session["speed"], "gain": session["gain"], "bass": session["bass"],
                             "treble": session["treble"], "snr": session["snr"],
                             "noise_seed": "%d:noise:%d:%d:%d" % (args.seed, s, v, u),
                             "table_seed": "%d:noise" % args.seed, "speaker": s})
    return speakers, jobs


_noise = {}


def noise_table(seed):
    """2^18 standard-normal samples from a seeded generator, made once per process;
    each utterance adds a stretch of it starting at its own seeded offset."""
    if seed not in _noise:
        r = random.Random(seed)
        _noise[seed] = [r.gauss(0.0, 1.0) for _ in range(1 << 18)]
    return _noise[seed]


def synth(job, out_dir):
    """One utterance: espeak-ng -> sox (16 kHz mono 16-bit, channel) -> trim to 1-4 s, noise -> WAV."""
    speak = subprocess.Popen(["espeak-ng", "-v", job["voice"], "-p", str(job["pitch"]), "-s", str(job["speed"]),
                              "--stdout", job["text"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sox = subprocess.run(["sox", "-R", "-D", "-t", "wav", "-", "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer",
                          "-t", "raw", "-", "gain", str(job["gain"]), "bass", str(job["bass"]), "treble", str(job["treble"])],
                         stdin=speak.stdout, capture_output=True)
    speak.stdout.close()
    speak_err = speak.stderr.read()
    speak.stderr.close()
    if speak.wait() != 0 or sox.returncode != 0:
        return "%s: espeak-ng/sox failed: %s %s" % (job["path"], speak_err.decode(errors="replace").strip(),
                                                    sox.stderr.decode(errors="replace").strip())
    x = array.array("h")
    x.frombytes(sox.stdout[: len(sox.stdout) // 2 * 2])
    if sys.byteorder == "big":
        x.byteswap()
    # trim the synthesiser's leading and trailing silence, then fit into [MIN_S, MAX_S]
    peak = max((abs(v) for v in x), default=0)
    if peak == 0:
        return "%s: espeak-ng produced silence for %r" % (job["path"], job["text"])
    thr = max(1, peak // 50)
    first = next(i for i, v in enumerate(x) if abs(v) > thr)
    last = len(x) - next(i for i, v in enumerate(reversed(x)) if abs(v) > thr)
    lead = min(first, int(0.1 * RATE))
    y = x[first - lead: min(len(x), last + int(0.1 * RATE))]
    hi, lo = int(MAX_S * RATE) - 160, int(MIN_S * RATE) + 160
    if len(y) > hi:
        y = y[:hi]
        fade = int(0.05 * RATE)
        for i in range(fade):
            y[hi - fade + i] = int(y[hi - fade + i] * (fade - i) / fade)
    if len(y) < lo:
        pad = lo - len(y)
        y = array.array("h", [0]) * (pad // 2) + y + array.array("h", [0]) * (pad - pad // 2)
    # background noise at the session's SNR (relative to the utterance's RMS)
    rms = math.sqrt(sum(float(v) * v for v in y) / len(y))
    sigma = rms / (10 ** (job["snr"] / 20.0))
    table = noise_table(job["table_seed"])
    off = random.Random(job["noise_seed"]).randrange(len(table) - len(y))
    y = array.array("h", (max(-32768, min(32767, int(round(v + sigma * n)))) for v, n in zip(y, table[off:off + len(y)])))
    if sys.byteorder == "big":
        y.byteswap()
    path = os.path.join(out_dir, "wav", job["path"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(y.tobytes())
    with open(path + ".tmp", "wb") as f:
        f.write(buf.getvalue())
    os.replace(path + ".tmp", path)
    return None


def synth_star(a):
    return synth(*a)


def make_trials(args, speakers, jobs):
    """Balanced trials over the held-out speakers: half same speaker (two different
    utterances), half different; no pair twice, no utterance with itself."""
    held = set(range(args.speakers - args.trials_speakers, args.speakers))
    by_spk = {}
    for j in jobs:
        if j["speaker"] in held:
            by_spk.setdefault(j["speaker"], []).append(j["path"])
    r = random.Random("%d:trials" % args.seed)
    same_all = [(a, b) for s in sorted(by_spk) for i, a in enumerate(by_spk[s]) for b in by_spk[s][i + 1:]]
    n_half = args.trials // 2
    if n_half > len(same_all):
        sys.stderr.write("make_corpus.py: only %d distinct same-speaker pairs among the %d held-out speakers; "
                         "writing %d trials instead of %d\n" % (len(same_all), len(held), 2 * len(same_all), args.trials))
        n_half = len(same_all)
    same = r.sample(same_all, n_half)
    spk_list = sorted(by_spk)
    diff, seen = [], set()
    while len(diff) < n_half:
        s1, s2 = r.sample(spk_list, 2)
        a, b = r.choice(by_spk[s1]), r.choice(by_spk[s2])
        if (a, b) in seen or (b, a) in seen:
            continue
        seen.add((a, b))
        diff.append((a, b))
    trials = [(1, a, b) for a, b in same] + [(0, a, b) for a, b in diff]
    r.shuffle(trials)
    with open(os.path.join(args.out, "trials.txt"), "w") as f:
        for y, a, b in trials:
            f.write("%d %s %s\n" % (y, a, b))
    return len(trials)


def write_readme(args, speakers, n_utt, n_trials):
    lines = [
        "A synthetic speaker-verification corpus in VoxCeleb's layout, made by examples/make_corpus.py",
        "(ctrain) with espeak-ng and sox. It is NOT recorded speech: each speaker is an espeak-ng voice",
        "(accent + variant + base pitch + speed); each video is a session with a little jitter of pitch",
        "and speed and its own channel (gain, bass/treble tilt, background noise at an SNR).",
        "Text: sentences from /usr/share/common-licenses.",
        "",
        "command: make_corpus.py --out DIR --speakers %d --videos %d --utts %d --seed %d --trials-speakers %d --trials %d%s"
        % (args.speakers, args.videos, args.utts, args.seed, args.trials_speakers, args.trials,
           (" --accents %s" % args.accents if args.accents else "") + (" --first-id %d" % args.first_id if args.first_id != 10001 else "")),
        "files:   wav/idNNNNN/VIDEOID/NNNNN.wav (%d utterances, 16 kHz mono 16-bit PCM, %.0f-%.0f s)" % (n_utt, MIN_S, MAX_S),
        "         trials.txt (%d trials, half same-speaker, official VoxCeleb format: LABEL PATH1 PATH2)" % n_trials,
        "trials:  over the last %d speakers (%s .. %s): keep them out of training"
        % (args.trials_speakers, speakers[-args.trials_speakers]["id"], speakers[-1]["id"]),
        "",
        "speaker  voice                        pitch speed",
    ]
    for s in speakers:
        lines.append("%-8s %-28s %5d %5d" % (s["id"], s["accent"] + "+" + s["variant"], s["pitch"], s["speed"]))
    with open(os.path.join(args.out, "README.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description="Synthesise a VoxCeleb-layout speaker corpus with espeak-ng and sox.")
    p.add_argument("--out", required=True, help="output directory (wav/, trials.txt, README.txt)")
    p.add_argument("--speakers", type=int, default=100)
    p.add_argument("--videos", type=int, default=3, help="sessions per speaker")
    p.add_argument("--utts", type=int, default=4, help="utterances per video")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--trials-speakers", type=int, default=20, help="the last N speakers make the trial list")
    p.add_argument("--trials", type=int, default=2000, help="trials (half same-speaker)")
    p.add_argument("--jobs", type=int, default=2, help="parallel synthesis processes")
    p.add_argument("--accents", default=None,
                   help="comma-separated espeak-ng voices to draw accents from (default: the English ones, %s)" % ",".join(ACCENTS))
    p.add_argument("--first-id", type=int, default=10001, help="the first speaker's number (idNNNNN)")
    args = p.parse_args()
    if args.speakers < 2 or args.videos < 1 or args.utts < 1 or args.jobs < 1 or args.trials < 2:
        fail("need --speakers >= 2, --videos >= 1, --utts >= 1, --jobs >= 1, --trials >= 2")
    if not 2 <= args.trials_speakers <= args.speakers:
        fail("--trials-speakers %d: use 2 .. --speakers (%d)" % (args.trials_speakers, args.speakers))
    if not 0 <= args.first_id <= 99999 - args.speakers + 1:
        fail("--first-id %d: speaker ids are idNNNNN, so use 0 .. %d" % (args.first_id, 99999 - args.speakers + 1))
    wanted = None
    if args.accents is not None:
        wanted = [a for a in args.accents.split(",") if a]
        if not wanted:
            fail("--accents: give at least one espeak-ng voice, e.g. --accents de,fr,es")
    if args.videos * args.utts < 2:
        fail("each speaker needs >= 2 utterances (--videos x --utts) for same-speaker trials")
    check_tools()
    accents, variants = available_voices(wanted)
    sentences = load_sentences()
    speakers, jobs = plan(args, accents, variants, sentences)
    os.makedirs(os.path.join(args.out, "wav"), exist_ok=True)
    with Pool(args.jobs) as pool:
        errors = [e for e in pool.imap_unordered(synth_star, [(j, args.out) for j in jobs], chunksize=8) if e]
    if errors:
        fail("%d utterances failed, first: %s" % (len(errors), errors[0]))
    n_trials = make_trials(args, speakers, jobs)
    write_readme(args, speakers, len(jobs), n_trials)
    print("make_corpus.py: %d speakers, %d utterances in %s/wav, %d trials in %s/trials.txt"
          % (len(speakers), len(jobs), args.out, n_trials, args.out))


if __name__ == "__main__":
    main()
