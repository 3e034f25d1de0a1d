"""One process of ember.multiprocessing.spawn: unpickle (fn, args), call fn(rank, *args)."""
import os
import pickle
import sys

if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        fn, args = pickle.load(f)
    fn(int(os.environ["LOCAL_RANK"]), *args)
