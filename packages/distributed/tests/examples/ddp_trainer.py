"""A DDP training script in the style of PyTorch's ddp-tutorial-series (a Trainer class, a
DataLoader with a DistributedSampler, snapshots to resume from), written for `torch` and run here
with `import ember as torch`:

    python -m ember.distributed.run --nproc-per-node 2 ddp_trainer.py EPOCHS SAVE_EVERY \
        --batch_size B --snapshot_path PATH

Rank 0 prints `LOSS <epoch> <step> <loss averaged over ranks>`; with a global batch of
B x world size the losses equal a 1-process run with batch B x world size."""
import argparse
import os

from datautils import RandomClassification

import ember as torch
import ember.nn.functional as F
from ember.distributed import (
    all_reduce,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
)
from ember.nn.parallel import DistributedDataParallel as DDP
from ember.utils.data import DataLoader
from ember.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            self._load_snapshot()
        self.model = DDP(self.model)

    def _load_snapshot(self):
        snapshot = torch.load(self.snapshot_path, weights_only=True)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        if self.global_rank == 0:
            print(f"Resuming training from snapshot at epoch {self.epochs_run}", flush=True)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(),
                    "OPTIMIZER_STATE": self.optimizer.state_dict(),
                    "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | snapshot saved at {self.snapshot_path}", flush=True)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for step, (source, targets) in enumerate(self.train_data):
            loss = self._run_batch(source, targets)
            all_reduce(loss)
            if self.global_rank == 0:
                print(f"LOSS {epoch} {step} {loss.item() / get_world_size():.6f}", flush=True)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.global_rank == 0 and (epoch + 1) % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    torch.manual_seed(0)
    train_set = RandomClassification(64)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=False,
                      sampler=DistributedSampler(dataset, shuffle=False))


def main(save_every, total_epochs, batch_size, snapshot_path):
    init_process_group(backend="gloo")
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    Trainer(model, train_data, optimizer, save_every, snapshot_path).train(total_epochs)
    if get_rank() == 0:
        print("DONE", flush=True)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=16, type=int, help="Input batch size per rank")
    parser.add_argument("--snapshot_path", default="snapshot.pt")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size, args.snapshot_path)
