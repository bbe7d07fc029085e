#!/usr/bin/env python3
"""tensorboard_check.py - reads the TensorBoard event files of one ctrain run with
TensorBoard's own reader and checks every tag and every value against the run's
own record of its epochs. Run with the python of tests/tensorboard_venv.sh.

  usage: tensorboard_check.py DIR (--csv LOG.csv | --time-json RUN.json) --n-train N
                              --lr LR [--gamma G --step-size S] [--eer]

DIR is one device's folder (LOGDIR/cpu). What is checked:
  - every record's framing with TensorBoard's masked_crc32c: the CRC of the length
    and of the data; the first event is file_version "brain.Event:2", the second a
    SessionLog START;
  - EventAccumulator (tensorboard.backend.event_processing.event_accumulator) loads
    the folder: file_version 2, exactly the tags expected (loss, accuracy, val_loss,
    val_accuracy, learning_rate, epoch_seconds, samples_per_second, and val_eer with
    --eer; for `ctrain time` also data_wait_share, a share in [0, 1], and the power,
    energy and temperature tags where the machine has those counters), each at steps 1..E;
  - each value against the record: the CSV log's (6 decimals; seconds 3) or
    `ctrain time --json`'s (10 significant digits), the learning rate of the step
    schedule lr * gamma^floor((step - 1) / step_size), and samples/s = N / the
    epoch's training seconds.
Prints one line per tag; exits 0 when everything matches, 1 otherwise.
"""
import argparse
import csv
import glob
import json
import os
import struct
import sys
import time

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def check_framing(path):
    """Every record of one event file, its CRCs checked; returns the Events."""
    events = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            fail("%s: %d trailing bytes, not a record" % (path, len(data) - pos))
            break
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        (crc_len,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if crc_len != masked_crc32c(data[pos:pos + 8]):
            fail("%s: record at byte %d: the CRC of its length is wrong" % (path, pos))
        body = data[pos + 12:pos + 12 + length]
        (crc_body,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if crc_body != masked_crc32c(body):
            fail("%s: record at byte %d: the CRC of its data is wrong" % (path, pos))
        events.append(event_pb2.Event.FromString(body))
        pos += 16 + length
    if len(events) < 2 or events[0].file_version != "brain.Event:2":
        fail("%s: the first event is not file_version brain.Event:2" % path)
    elif events[1].session_log.status != event_pb2.SessionLog.START:
        fail("%s: the second event is not a SessionLog START" % path)
    return events


def record_rows(args):
    """The run's own numbers per epoch: dicts with loss, ..., seconds, train_seconds."""
    rows = []
    if args.csv:
        with open(args.csv) as f:
            for r in csv.DictReader(f):
                rows.append({k: (float(v) if v != "" else None) for k, v in r.items()})
        return rows, 1e-6, 6e-4, 5e-4   # metric, seconds and train-seconds rounding
    with open(args.time_json) as f:
        j = json.load(f)
    for e in j["epochs"]:
        rows.append({"loss": e["loss"], "accuracy": e["accuracy"], "val_loss": e["val_loss"],
                     "val_accuracy": e["val_accuracy"], "val_eer": None, "seconds": e["seconds"],
                     "train_seconds": e["train_seconds"]})
    return rows, 1e-9, 1e-9, 1e-9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--csv")
    p.add_argument("--time-json")
    p.add_argument("--n-train", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--gamma", type=float, default=1.0)
    p.add_argument("--step-size", type=int, default=1)
    p.add_argument("--eer", action="store_true")
    args = p.parse_args()

    files = sorted(glob.glob(os.path.join(args.dir, "events.out.tfevents.*")))
    if not files:
        fail("no events.out.tfevents.* file in %s" % args.dir)
        return 1
    for path in files:
        check_framing(path)

    acc = event_accumulator.EventAccumulator(args.dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    if acc.file_version != 2.0:
        fail("EventAccumulator's file_version is %r, not 2" % acc.file_version)
    want = {"loss", "accuracy", "val_loss", "val_accuracy", "learning_rate", "epoch_seconds", "samples_per_second"}
    if args.eer:
        want.add("val_eer")
    # `ctrain time` adds the share of training spent waiting for data, and the counters' figures
    # where the machine has the counters (cli/time_hw.c): required and allowed
    optional = set()
    if args.time_json:
        want.add("data_wait_share")
        optional = {"power_watts", "peak_watts", "energy_joules", "samples_per_joule", "temperature_celsius",
                    "gpu_busy_percent", "gpu_sm_clock_mhz", "cpu_package_watts"}
    tags = set(acc.Tags()["scalars"])
    if not (want <= tags <= want | optional):
        fail("tags %s, expected %s%s" % (sorted(tags), sorted(want), " and some of %s" % sorted(optional) if optional else ""))
    for tag in sorted(tags & optional):
        steps = [e.step for e in acc.Scalars(tag)]
        if not steps or steps != sorted(set(steps)):
            fail("%s: steps %s" % (tag, steps))

    rows, metric_tol, seconds_tol, train_tol = record_rows(args)
    now = time.time()
    for tag in sorted(tags & want):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if steps != list(range(1, len(rows) + 1)):
            fail("%s: steps %s, expected 1..%d" % (tag, steps, len(rows)))
            continue
        worst = 0.0
        for e, r in zip(events, rows):
            if not (now - 3600 < e.wall_time <= now + 60):
                fail("%s step %d: wall_time %.3f is not the time of the run" % (tag, e.step, e.wall_time))
            if tag == "learning_rate":
                ref, tol = args.lr * args.gamma ** ((e.step - 1) // args.step_size), 0.0
            elif tag == "data_wait_share":
                if not 0.0 <= e.value <= 1.0:
                    fail("%s step %d: %.9g is not a share" % (tag, e.step, e.value))
                continue
            elif tag == "epoch_seconds":
                ref, tol = r["seconds"], seconds_tol
            elif tag == "samples_per_second":
                # N / t for every t the recorded (rounded) training seconds allow
                t = r["train_seconds"]
                lo = args.n_train / (t + train_tol)
                hi = args.n_train / (t - train_tol) if t > train_tol else float("inf")
                if not lo * (1 - 1e-6) <= e.value <= hi * (1 + 1e-6):
                    fail("%s step %d: TensorBoard reads %.9g, the run's seconds allow %.9g..%.9g" % (tag, e.step, e.value, lo, hi))
                worst = max(worst, abs(e.value - args.n_train / t) if t > 0 else 0.0)
                continue
            else:
                ref, tol = r[tag], metric_tol
            if ref is None:
                fail("%s step %d: the run's record has no %s" % (tag, e.step, tag))
                continue
            err = abs(e.value - ref)
            worst = max(worst, err)
            if not err <= tol + 1e-6 * abs(ref):   # float32 in the event, plus the record's rounding
                fail("%s step %d: TensorBoard reads %.9g, the run recorded %.9g" % (tag, e.step, e.value, ref))
        print("%-20s %d steps, values as recorded (largest difference %.2e)" % (tag, len(events), worst))
    print("%d event file(s), %d tags, %d epochs: %s" % (len(files), len(tags), len(rows),
                                                        "all match" if not failures else "%d problem(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
