#!/usr/bin/env python3
"""Writes a val2017-sized synthetic COCO ground truth and results pair for timing `trainbench coco-eval`.

Standard library only and deterministic for a given --seed. Defaults match COCO val2017: 5,000 images, 80
categories, about 7.3 objects per image (polygons, 1% crowd regions as uncompressed RLE) and 100 detections per image,
most of them jittered copies of an object so that matching does real work.

  bench/coco_synthetic.py --out /tmp/coco_synth   # writes instances.json, results_bbox.json, results_segm.json
"""
import argparse
import json
import os
import random


def box_mask_counts(height, width, x0, y0, x1, y1):
    """Column-major run lengths of a mask with columns x0..x1-1 and rows y0..y1-1 set (an empty box: no ones)."""
    if x1 <= x0 or y1 <= y0:
        return [height * width]
    rows = y1 - y0
    counts = [x0 * height + y0]
    for column in range(x0, x1):
        counts.append(rows)
        counts.append(height - rows if column + 1 < x1 else height - y1 + (width - x1) * height)
    return counts


def compress(counts):
    """pycocotools' rleToString: 5 bits per character plus a continuation bit, counts after the third as deltas."""
    text = []
    for i, count in enumerate(counts):
        value = count - counts[i - 2] if i > 2 else count
        more = True
        while more:
            char = value & 0x1F
            value >>= 5
            more = value != -1 if char & 0x10 else value != 0
            if more:
                char |= 0x20
            text.append(chr(char + 48))
    return "".join(text)


def clipped_pixels(box, height, width):
    x, y, w, h = box
    x0, y0 = max(0, int(x)), max(0, int(y))
    return x0, y0, min(width, max(x0, int(x + w))), min(height, max(y0, int(y + h)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--categories", type=int, default=80)
    parser.add_argument("--detections-per-image", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)

    images, annotations, boxes, masks = [], [], [], []
    for image_id in range(1, args.images + 1):
        width, height = rng.choice([(640, 480), (480, 640), (640, 427), (500, 375)])
        images.append({"id": image_id, "width": width, "height": height, "file_name": f"{image_id:012d}.jpg"})
        objects = []
        for _ in range(rng.randint(1, 14)):
            w, h = rng.uniform(4, width / 2), rng.uniform(4, height / 2)
            x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
            category = rng.randint(1, args.categories)
            crowd = rng.random() < 0.01
            annotation = {"id": len(annotations) + 1, "image_id": image_id, "category_id": category,
                          "bbox": [round(v, 2) for v in (x, y, w, h)], "iscrowd": int(crowd)}
            if crowd:
                x0, y0, x1, y1 = clipped_pixels((x, y, w, h), height, width)
                annotation["segmentation"] = {"size": [height, width],
                                              "counts": box_mask_counts(height, width, x0, y0, x1, y1)}
                annotation["area"] = (x1 - x0) * (y1 - y0)
            else:
                # An octagon inside the box: corners cut by a quarter of each side.
                cx, cy = w / 4, h / 4
                points = [(x + cx, y), (x + w - cx, y), (x + w, y + cy), (x + w, y + h - cy),
                          (x + w - cx, y + h), (x + cx, y + h), (x, y + h - cy), (x, y + cy)]
                annotation["segmentation"] = [[round(v, 2) for point in points for v in point]]
                annotation["area"] = round(w * h - 4 * (cx * cy / 2), 2)
            annotations.append(annotation)
            objects.append((x, y, w, h, category))
        for _ in range(args.detections_per_image):
            if rng.random() < 0.6:
                x, y, w, h, category = rng.choice(objects)
                x, y = x + rng.gauss(0, w / 10), y + rng.gauss(0, h / 10)
                w, h = w * rng.uniform(0.8, 1.2), h * rng.uniform(0.8, 1.2)
                if rng.random() < 0.1:
                    category = rng.randint(1, args.categories)
            else:
                w, h = rng.uniform(4, width / 2), rng.uniform(4, height / 2)
                x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
                category = rng.randint(1, args.categories)
            score = round(rng.random(), 5)
            box = [round(v, 2) for v in (x, y, w, h)]
            boxes.append({"image_id": image_id, "category_id": category, "bbox": box, "score": score})
            x0, y0, x1, y1 = clipped_pixels(box, height, width)
            masks.append({"image_id": image_id, "category_id": category, "score": score,
                          "segmentation": {"size": [height, width],
                                           "counts": compress(box_mask_counts(height, width, x0, y0, x1, y1))}})

    categories = [{"id": k, "name": f"class{k}", "supercategory": "thing"} for k in range(1, args.categories + 1)]
    for name, content in (("instances.json", {"images": images, "categories": categories, "annotations": annotations}),
                          ("results_bbox.json", boxes), ("results_segm.json", masks)):
        with open(os.path.join(args.out, name), "w") as out:
            json.dump(content, out)
    print(f"{args.out}: {len(images)} images, {len(annotations)} annotations, {len(boxes)} detections")


if __name__ == "__main__":
    main()
