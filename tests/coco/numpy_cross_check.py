#!/usr/bin/python3
"""Cross-checks `trainbench coco-eval --type bbox --json` against an independent numpy re-implementation.

pycocotools cannot be installed here, so this script re-derives COCOeval's bbox evaluate / accumulate / summarize
from the rules written down in shared/reference/next-workloads.md section 1 (not from the C++ code), generates
random cases rich in the hard parts (tied scores, crowd regions, area-range boundaries, empty categories, more than
100 detections per image) and requires the 12 numbers to agree to 1e-9. Debian's python3-numpy only.

  tests/coco/numpy_cross_check.py build/bin/trainbench [--cases 20]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
AREA_RANGES = [(0, 1e10), (0, 32**2), (32**2, 96**2), (96**2, 1e10)]
MAX_DETS = [1, 10, 100]


def box_iou(d, g, crowd):
    w = min(d[0] + d[2], g[0] + g[2]) - max(d[0], g[0])
    h = min(d[1] + d[3], g[1] + g[3]) - max(d[1], g[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = d[2] * d[3] if crowd else d[2] * d[3] + g[2] * g[3] - inter
    return inter / union


def match_image(gts, dts, area_range):
    """One image and category: per threshold, which kept detections are true positives and which are ignored."""
    lo, hi = area_range
    g_ignored = [bool(g["iscrowd"]) or g["area"] < lo or g["area"] > hi for g in gts]
    g_order = sorted(range(len(gts)), key=lambda i: g_ignored[i])  # stable: counted ones first
    gts = [gts[i] for i in g_order]
    g_ignored = [g_ignored[i] for i in g_order]
    d_order = sorted(range(len(dts)), key=lambda i: -dts[i]["score"])[:MAX_DETS[-1]]
    dts = [dts[i] for i in d_order]
    tp = np.zeros((len(IOU_THRESHOLDS), len(dts)), bool)
    ignored = np.zeros((len(IOU_THRESHOLDS), len(dts)), bool)
    for t, threshold in enumerate(IOU_THRESHOLDS):
        taken = [False] * len(gts)
        for d, det in enumerate(dts):
            best, best_iou = -1, threshold
            for g, gt in enumerate(gts):
                if taken[g] and not gt["iscrowd"]:
                    continue
                if best >= 0 and not g_ignored[best] and g_ignored[g]:
                    break
                iou = box_iou(det["bbox"], gt["bbox"], gt["iscrowd"])
                if iou < best_iou:
                    continue
                best, best_iou = g, iou
            if best >= 0:
                taken[best] = True
                tp[t, d] = True
                ignored[t, d] = g_ignored[best]
        for d, det in enumerate(dts):
            if not tp[t, d] and (det["area"] < lo or det["area"] > hi):
                ignored[t, d] = True
    return [d["score"] for d in dts], tp, ignored, sum(not i for i in g_ignored)


def evaluate(truth, results):
    image_ids = sorted(image["id"] for image in truth["images"])
    category_ids = sorted(category["id"] for category in truth["categories"])
    precision = -np.ones((10, 101, len(category_ids), 4, 3))
    recall = -np.ones((10, len(category_ids), 4, 3))
    for r in results:
        r["area"] = r["bbox"][2] * r["bbox"][3]
    for k, category in enumerate(category_ids):
        for a, area_range in enumerate(AREA_RANGES):
            per_image = []
            for image in image_ids:
                gts = [g for g in truth["annotations"] if g["image_id"] == image and g["category_id"] == category]
                dts = [d for d in results if d["image_id"] == image and d["category_id"] == category]
                if gts or dts:
                    per_image.append(match_image(gts, dts, area_range))
            counted = sum(image[3] for image in per_image)
            if counted == 0:
                continue
            for m, max_det in enumerate(MAX_DETS):
                scores = np.concatenate([np.array(i[0][:max_det], float) for i in per_image])
                order = np.argsort(-scores, kind="mergesort")
                tp = np.concatenate([i[1][:, :max_det] for i in per_image], axis=1)[:, order]
                ignored = np.concatenate([i[2][:, :max_det] for i in per_image], axis=1)[:, order]
                tps = np.cumsum(tp & ~ignored, axis=1).astype(float)
                fps = np.cumsum(~tp & ~ignored, axis=1).astype(float)
                for t in range(10):
                    rc = tps[t] / counted
                    pr = tps[t] / (fps[t] + tps[t] + np.spacing(1))
                    recall[t, k, a, m] = rc[-1] if len(rc) else 0
                    pr = np.maximum.accumulate(pr[::-1])[::-1]
                    reached = np.searchsorted(rc, RECALL_POINTS, side="left")
                    precision[t, :, k, a, m] = [pr[i] if i < len(pr) else 0 for i in reached]

    def mean(values):
        values = values[values > -1]
        return float(np.mean(values)) if len(values) else -1.0

    stats = []
    for iou in (None, 0.5, 0.75):
        t = slice(None) if iou is None else np.where(IOU_THRESHOLDS == iou)[0]
        stats.append(mean(precision[t, :, :, 0, 2]))
    stats += [mean(precision[:, :, :, a, 2]) for a in (1, 2, 3)]
    stats += [mean(recall[:, :, 0, m]) for m in range(3)]
    stats += [mean(recall[:, :, a, 2]) for a in (1, 2, 3)]
    return stats


def random_case(rng):
    images = [{"id": i, "height": 200, "width": 200} for i in rng.sample(range(1, 60), rng.randint(1, 8))]
    categories = [{"id": k} for k in rng.sample(range(1, 20), rng.randint(1, 5))]
    annotations, results = [], []
    sides = [4, 16, 31, 32, 33, 60, 95, 96, 97, 120]  # areas around 32^2 and 96^2
    for image in images:
        for _ in range(rng.randint(0, 12)):
            w, h = rng.choice(sides), rng.choice(sides)
            box = [rng.randint(0, 80), rng.randint(0, 80), w, h]
            annotations.append({"id": len(annotations) + 1, "image_id": image["id"],
                                "category_id": rng.choice(categories)["id"], "bbox": box,
                                "area": rng.choice([w * h, w * h, 1024, 9216]), "iscrowd": int(rng.random() < 0.1)})
        for _ in range(rng.choice([0, 5, 30, 130])):
            if annotations and rng.random() < 0.6:
                source = rng.choice(annotations)
                box = [v + rng.choice([0, 0, 1, -2, 5]) for v in source["bbox"]]
                category = source["category_id"] if rng.random() < 0.9 else rng.choice(categories)["id"]
            else:
                box = [rng.randint(0, 150), rng.randint(0, 150), rng.choice(sides), rng.choice(sides)]
                category = rng.choice(categories)["id"]
            results.append({"image_id": image["id"], "category_id": category, "bbox": box,
                            "score": rng.choice([0.1, 0.5, 0.5, 0.9]) if rng.random() < 0.5 else rng.random()})
    return {"images": images, "categories": categories, "annotations": annotations}, results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trainbench")
    parser.add_argument("--cases", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(2021)
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for case in range(args.cases):
            truth, results = random_case(rng)
            gt_path, dt_path = os.path.join(folder, "gt.json"), os.path.join(folder, "dt.json")
            json.dump(truth, open(gt_path, "w"))
            json.dump(results, open(dt_path, "w"))
            output = subprocess.run([args.trainbench, "coco-eval", "--gt", gt_path, "--dt", dt_path, "--json"],
                                    check=True, capture_output=True, text=True).stdout
            ours = [stat["value"] for stat in json.loads(output)["stats"]]
            expected = evaluate(truth, results)
            difference = max(abs(a - b) for a, b in zip(ours, expected))
            worst = max(worst, difference)
            if difference > 1e-9:
                print(f"case {case}: trainbench {ours}\n        numpy      {expected}")
                return 1
    print(f"{args.cases} random cases agree; largest difference {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
