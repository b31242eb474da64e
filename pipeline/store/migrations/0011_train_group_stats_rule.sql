-- 0011: train_group_stats (0010) calls the one informative rule, sieve_uninformative (0009),
-- instead of writing max - min <= sieve_zero_var_tol() again; same columns, same values.
-- Forward-only: never edit this file once released; add a new numbered file instead.

CREATE OR REPLACE VIEW train_group_stats AS
SELECT
    train_id,
    step,
    problem_id,
    any_value(policy)                                AS policy,
    count(*)                                         AS n_samples,
    count(reward)                                    AS n,
    count(*) FILTER (WHERE correct)                  AS k,
    count(*) FILTER (WHERE correct) / nullif(count(reward), 0) AS pass_rate,
    avg(reward)                                      AS reward_mean,
    stddev_pop(reward)                               AS reward_std,
    NOT sieve_uninformative(max(reward), min(reward)) AS informative
FROM train_rollouts
GROUP BY train_id, step, problem_id;
