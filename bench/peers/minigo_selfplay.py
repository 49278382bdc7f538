"""Same-machine peer for the self-play line of `trainbench bench minigo`: a straightforward Python MCTS over
the same network in Debian's python3-torch, batching the same way (`concurrent_games` games searched at
once, each tree selecting `virtual_losses` leaves per round, one network call per round), with the preset's
board, readouts, virtual losses, PUCT constants and pass rule (`allow_pass`).

    /usr/bin/python3 bench/peers/minigo_selfplay.py --preset mini --threads 2 --steps 64

--steps is the number of games (at least concurrent_games), as `trainbench bench minigo` counts them. The
rules are the same as trainbench's (captures, suicide illegal, positional superko, area scoring), written
plainly: liberties by flood fill, a set of board tuples for superko. Scoring here is plain Tromp-Taylor (no
pass-alive resolution), which only decides the winner at a game's end and costs nothing measurable.
Fast moves (fewer readouts) and tree reuse (the chosen child's subtree is the next root, cleared before a
full move when fast moves are on; every search adds its readouts) are as trainbench plays them; Dirichlet
noise, resignation and the recorded examples are left out, as they do not change the work per move.
"""
import math
import random
import time

import torch
import torch.nn.functional as F
from torch import nn

import step_timing

EMPTY, BLACK, WHITE = 0, 1, 2


class Net(nn.Module):
    """MiniGo's dual network (tests/workloads/minigo/minigo_reference.py has the same layers functionally)."""

    def __init__(self, size, filters, blocks, fc_width):
        super().__init__()
        self.initial = nn.Sequential(nn.Conv2d(13, filters, 3, padding=1, bias=False), nn.BatchNorm2d(filters))
        self.blocks = nn.ModuleList(
            nn.ModuleList([nn.Conv2d(filters, filters, 3, padding=1, bias=False), nn.BatchNorm2d(filters),
                           nn.Conv2d(filters, filters, 3, padding=1, bias=False), nn.BatchNorm2d(filters)])
            for _ in range(blocks))
        self.policy = nn.Sequential(nn.Conv2d(filters, 2, 1, bias=False), nn.BatchNorm2d(2, affine=False))
        self.policy_fc = nn.Linear(2 * size * size, size * size + 1)
        self.value = nn.Sequential(nn.Conv2d(filters, 1, 1, bias=False), nn.BatchNorm2d(1, affine=False))
        self.value_fc1 = nn.Linear(size * size, fc_width)
        self.value_fc2 = nn.Linear(fc_width, 1)

    def forward(self, x):
        x = F.relu(self.initial(x))
        for conv1, bn1, conv2, bn2 in self.blocks:
            x = F.relu(x + bn2(conv2(F.relu(bn1(conv1(x))))))
        p = self.policy_fc(F.relu(self.policy(x)).flatten(1))
        v = torch.tanh(self.value_fc2(F.relu(self.value_fc1(F.relu(self.value(x)).flatten(1))))).squeeze(1)
        return torch.softmax(p, 1), v


class Position:
    def __init__(self, size, komi):
        self.size, self.komi = size, komi
        self.board = [EMPTY] * (size * size)
        self.to_play = BLACK
        self.history = []  # earlier boards, newest last
        self.passes = 0
        self.moves = 0
        self.neighbors = [[q for q in (p - size, p + size, p - 1 if p % size else -1, p + 1 if (p + 1) % size else -1)
                           if 0 <= q < size * size] for p in range(size * size)]

    def copy(self):
        other = Position.__new__(Position)
        other.__dict__.update(self.__dict__)
        other.board = list(self.board)
        other.history = list(self.history[-3:])
        return other

    def group(self, board, point):
        color, stones, liberties, stack = board[point], {point}, set(), [point]
        while stack:
            for q in self.neighbors[stack.pop()]:
                if board[q] == EMPTY:
                    liberties.add(q)
                elif board[q] == color and q not in stones:
                    stones.add(q)
                    stack.append(q)
        return stones, liberties

    def after(self, move):
        """The board after `move` by the side to move, or None when it is suicide."""
        board = list(self.board)
        board[move] = self.to_play
        other = 3 - self.to_play
        for q in self.neighbors[move]:
            if board[q] == other:
                stones, liberties = self.group(board, q)
                if not liberties:
                    for s in stones:
                        board[s] = EMPTY
        return None if not self.group(board, move)[1] else board

    def legal_moves(self, seen, allow_pass=True):
        """The points a move may take and the pass; without allow_pass, the pass only where no point is legal."""
        moves = []
        for p in range(self.size * self.size):
            if self.board[p] == EMPTY:
                board = self.after(p)
                if board is not None and tuple(board) not in seen:
                    moves.append(p)
        if allow_pass or not moves:
            moves.append(self.size * self.size)
        return moves

    def play(self, move):
        self.history.append(self.board)
        self.moves += 1
        if move == self.size * self.size:
            self.passes += 1
        else:
            self.passes = 0
            self.board = self.after(move)
        self.to_play = 3 - self.to_play

    def features(self):
        n = self.size * self.size
        planes = torch.zeros(13, n)
        boards = [self.board] + self.history[::-1][:3]
        for t, board in enumerate(boards):
            for p, c in enumerate(board):
                if c == self.to_play:
                    planes[2 * t, p] = 1
                elif c != EMPTY:
                    planes[2 * t + 1, p] = 1
        if self.to_play == BLACK:
            planes[8] = 1
        for p, c in enumerate(self.board):
            if c != EMPTY:
                libs = len(self.group(self.board, p)[1])
                if libs <= 3:
                    planes[8 + libs, p] = 1
            elif any(self.board[q] == 3 - self.to_play and len(self.group(self.board, q)[1]) == 1
                     for q in self.neighbors[p]):
                planes[12, p] = 1
        return planes.view(13, self.size, self.size)

    def score(self):
        black = white = 0
        seen = set()
        for p, c in enumerate(self.board):
            if c == BLACK:
                black += 1
            elif c == WHITE:
                white += 1
            elif p not in seen:
                region, stack, borders = {p}, [p], set()
                while stack:
                    for q in self.neighbors[stack.pop()]:
                        if self.board[q] == EMPTY and q not in region:
                            region.add(q)
                            stack.append(q)
                        elif self.board[q] != EMPTY:
                            borders.add(self.board[q])
                seen |= region
                if borders == {BLACK}:
                    black += len(region)
                elif borders == {WHITE}:
                    white += len(region)
        return black - white - self.komi


class Node:
    def __init__(self, parent, move, position):
        self.parent, self.move, self.position = parent, move, position
        self.children = {}
        self.priors = None  # move -> prior once evaluated
        self.n, self.w = 0, 0.0
        self.pending = False

    def sign(self):
        return 1 if self.position.to_play == BLACK else -1


class Tree:
    def __init__(self, position, seen, config):
        self.root = Node(None, None, position)
        self.seen = seen
        self.c_base, self.c_init = 19652, 1.25
        self.penalty = config["value_init_penalty"]

    def select(self):
        node = self.root
        while node.priors is not None and not node.pending:
            n = node.n
            scale = 2 * (math.log((1 + n + self.c_base) / self.c_base) + self.c_init) * math.sqrt(max(1, n - 1))
            parent_q = node.sign() * node.w / (1 + node.n)
            best, best_score = None, -1e30
            for move, prior in node.priors.items():
                child = node.children.get(move)
                visits = child.n if child else 0
                q = node.sign() * child.w / (1 + child.n) if child and child.n else parent_q - self.penalty
                score = q + scale * prior / (1 + visits)
                if score > best_score:
                    best, best_score = move, score
            child = node.children.get(best)
            if child is None:
                position = node.position.copy()
                position.play(best)
                child = node.children[best] = Node(node, best, position)
                node = child
                break
            node = child
        if node.pending:
            return None
        at = node
        while at:  # virtual loss
            at.n += 1
            at.w += at.sign()
            at = at.parent
        return node

    def backup(self, node, value):
        at = node
        while at:
            at.w += value - at.sign()
            at = at.parent


def main():
    args, config = step_timing.setup("minigo", __doc__)
    size, komi = config["board_size"], config["komi"]
    net = Net(size, config["filters"], config["trunk_blocks"], config["fc_width"]).eval()
    games_total = max(args.steps, config["concurrent_games"])
    virtual_losses = config["virtual_losses"]
    rng = random.Random(0)
    max_length = 2 * size * size
    started = 0
    slots = []

    def new_game():
        nonlocal started
        started += 1
        position = Position(size, komi)
        seen = {tuple(position.board)}
        return {"position": position, "seen": seen, "tree": None, "target": 0}

    def start_move(slot, played=None):
        fast = config["fast_readouts"] > 0 and rng.random() < config["fast_move_probability"]
        tree = slot["tree"]
        kept = tree.root.children.get(played) if tree and played is not None else None
        if kept is not None and kept.priors is not None and (fast or config["fast_move_probability"] <= 0):
            kept.parent = None
            tree.root = kept
        else:
            slot["tree"] = Tree(slot["position"], slot["seen"], config)
        slot["target"] = slot["tree"].root.n + (config["fast_readouts"] if fast else config["num_readouts"])

    for _ in range(min(config["concurrent_games"], games_total)):
        slot = new_game()
        start_move(slot)
        slots.append(slot)
    moves = evaluations = batches = 0
    begin = time.perf_counter()
    with torch.inference_mode():
        while slots:
            leaves = []
            for slot in list(slots):
                tree = slot["tree"]
                while tree.root.priors is not None and tree.root.n >= slot["target"]:
                    root = tree.root
                    move = max(root.children, key=lambda m: root.children[m].n)
                    slot["position"] = slot["position"].copy()
                    slot["position"].play(move)
                    slot["seen"].add(tuple(slot["position"].board))
                    moves += 1
                    if slot["position"].passes >= 2 or slot["position"].moves >= max_length:
                        slot["position"].score()
                        slots.remove(slot)
                        if started < games_total:
                            slot = new_game()
                            slots.append(slot)
                        else:
                            slot = None
                            break
                    start_move(slot, move)
                    tree = slot["tree"]
                if slot is None:
                    continue
                wanted = virtual_losses if tree.root.priors is None else min(virtual_losses, slot["target"] - tree.root.n)
                for _ in range(wanted):
                    leaf = tree.select()
                    if leaf is None:
                        break
                    position = leaf.position
                    if position.passes >= 2 or position.moves >= max_length:
                        tree.backup(leaf, 1.0 if position.score() > 0 else -1.0)
                        continue
                    leaf.pending = True
                    leaves.append((tree, leaf))
            if not leaves:
                continue
            planes = torch.stack([leaf.position.features() for _, leaf in leaves])
            policy, values = net(planes)
            batches += 1
            evaluations += len(leaves)
            for (tree, leaf), probabilities, value in zip(leaves, policy.tolist(), values.tolist()):
                seen = tree.seen | {tuple(b) for b in leaf.position.history}
                leaf.priors = {m: probabilities[m] for m in leaf.position.legal_moves(seen, config["allow_pass"])}
                leaf.pending = False
                tree.backup(leaf, value)
    seconds = time.perf_counter() - begin
    print(f"python3-torch {torch.__version__}: self-play {moves / seconds:10.1f} moves/s, "
          f"{evaluations / seconds:.1f} network evaluations/s, mean inference batch {evaluations / max(1, batches):.1f}  "
          f"({games_total} games of {config['concurrent_games']} concurrent, {config['num_readouts']} readouts x "
          f"{virtual_losses} virtual losses, {size}x{size}, {args.threads} threads)")


if __name__ == "__main__":
    main()
