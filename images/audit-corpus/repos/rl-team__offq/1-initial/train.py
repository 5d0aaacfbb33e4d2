import argparse
import os

import d4rl  # noqa: F401  (registers the datasets)
import gym
import numpy as np
import torch
import yaml

from model import Actor, CriticEnsemble
from scores import normalized


def rollout(env, actor, episodes, device):
    returns = []
    for _ in range(episodes):
        obs, done, total = env.reset(), False, 0.0
        while not done:
            with torch.no_grad():
                act = actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
            obs, reward, done, _ = env.step(act.cpu().numpy())
            total += reward
        returns.append(total)
    return float(np.mean(returns))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch_size", type=int, default=64)
    args = parser.parse_args()
    cfg = yaml.safe_load(open(args.config))
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = gym.make(cfg["env"])
    data = {k: torch.as_tensor(v, device=device) for k, v in d4rl.qlearning_dataset(env).items()}
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    actor = Actor(obs_dim, act_dim).to(device)
    critics = CriticEnsemble(obs_dim, act_dim, cfg["num_critics"]).to(device)
    a_opt = torch.optim.Adam(actor.parameters(), lr=cfg["lr"])
    c_opt = torch.optim.Adam(critics.parameters(), lr=cfg["lr"])
    n = data["observations"].shape[0]
    for step in range(cfg["steps"]):
        idx = torch.randint(0, n, (args.batch_size,), device=device)
        obs, act = data["observations"][idx], data["actions"][idx]
        rew, nxt, term = data["rewards"][idx], data["next_observations"][idx], data["terminals"][idx]
        with torch.no_grad():
            target = rew + 0.99 * (1 - term.float()) * critics(nxt, actor(nxt)).min(0)[0]
        q = critics(obs, act)
        q_rand = critics(obs, torch.rand_like(act) * 2 - 1)
        c_loss = ((q - target) ** 2).mean() + cfg["alpha"] * (q_rand.mean() - q.mean())
        c_opt.zero_grad()
        c_loss.backward()
        c_opt.step()
        a_loss = -critics(obs, actor(obs)).min(0)[0].mean()
        a_opt.zero_grad()
        a_loss.backward()
        a_opt.step()
        if (step + 1) % cfg["eval_every"] == 0:
            score = normalized(cfg["env"], rollout(env, actor, cfg["eval_episodes"], device))
            print(f"step {step + 1}: normalized score {score:.1f}")
    out = os.path.join("runs", cfg["env"], f"seed{args.seed}")
    os.makedirs(out, exist_ok=True)
    torch.save(actor.state_dict(), os.path.join(out, "actor.pt"))


if __name__ == "__main__":
    main()
