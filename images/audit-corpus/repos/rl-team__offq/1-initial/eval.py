import argparse
import os

import d4rl  # noqa: F401
import gym
import torch
import yaml

from model import Actor
from scores import normalized
from train import rollout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    env = gym.make(cfg["env"])
    actor = Actor(env.observation_space.shape[0], env.action_space.shape[0])
    actor.load_state_dict(torch.load(os.path.join(args.checkpoint, "actor.pt"), map_location="cpu"))
    ret = rollout(env, actor, args.episodes, "cpu")
    print(f"{cfg['env']}: return {ret:.1f}, normalized score {normalized(cfg['env'], ret):.1f}")


if __name__ == "__main__":
    main()
