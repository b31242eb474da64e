-- Problems of one run that already have all their samples stored (a committed chunk).
SELECT problem_id
FROM rollouts
WHERE run_id = $run_id
GROUP BY problem_id
HAVING count(*) >= $group_size
