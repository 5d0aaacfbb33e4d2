# Reference returns for D4RL's normalized score: 100 * (R - random) / (expert - random).
REF = {
    "hopper": (3234.3, -20.272305),
    "halfcheetah": (-280.178953, 12135.0),
    "walker2d": (1.629008, 4592.3),
}


def normalized(env_name, ret):
    random_ret, expert_ret = REF[env_name.split("-")[0]]
    return 100.0 * (ret - random_ret) / (expert_ret - random_ret)
