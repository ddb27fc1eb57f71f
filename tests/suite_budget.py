"""Default-run cases that the suite's CPU budget sends to ``slow`` (``make test-all`` runs them).

The default run (``make test``) must stay under 5 CPU minutes on a 2-core machine, and every
property must stay in the suite (the suite is ``make test-all``). Each case below still runs
under ``-m slow``, and the default run keeps the *guard* named beside it. Two kinds:

- a costly twin (the tables up to ``_C2``): the same property is also checked in the default
  run by the guard (a cheaper test of the same code path, or the same property on another
  sampler);
- a long statistical test (``SLOW_CASES_A3``, ``_B3``, ``_C3``, stop 41: a chain against an
  exact posterior, an audit of many runs, a calibration study, a Monte Carlo law): the guard
  runs the same code path by default and asserts something real about it (a cheaper check, a
  closed form, bit-for-bit agreement, a refusal, the release's accounting); the statistical
  property itself runs under ``-m slow`` only, as each entry's why says.
``tests/conftest.py`` applies the marks at collection; ``tests/test_suite_budget.py`` checks
that every case and every guard exists, and that every guard is in the default run.

Most cases elsewhere carry their own ``@pytest.mark.slow`` with the guard in a comment beside
it; these are the ones moved together when the suite's cost was cut (stop 37), kept in one
table so that the cut can be read, and undone, in one place. Costs are CPU seconds per case in
a full default run on this machine.
"""
from __future__ import annotations

#: ``node id -> (guards, why)``: the guards are node ids of default-run tests.
SLOW_CASES: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/runtime/test_compile_cache.py::test_persistent_cache_holds_no_data_and_serves_a_new_process": (
        ("tests/runtime/test_driver_data_argument.py::test_compiled_run_holds_no_data_constant[dp-hmc]",
         "tests/runtime/test_compile_cache.py::test_persistent_cache_switches"),
        "two child processes (~10 CPU-s). The file the cache writes is the executable whose HLO the "
        "guard finds free of any data-sized constant; the switches are checked in-process."),
    "tests/runtime/test_compile_cache.py::test_a_model_built_again_alike_reuses_the_program_and_another_does_not": (
        ("tests/runtime/test_compile_cache.py::test_repeated_call_on_new_data_compiles_nothing",
         "tests/runtime/test_compile_cache.py::test_model_key_tells_apart_what_a_trace_would"),
        "four programs (~7 CPU-s). A hit compiles nothing and gives the draws of its run (first "
        "guard); the key that decides a hit tells apart what a trace would (second)."),
    "tests/audit/test_audit_subsampled.py::test_miscalibrated_subsampled_sampler_is_flagged[minibatch-penalty-sensitivity-undercounted-x2]": (
        ("tests/audit/test_audit.py::test_miscalibrated_sampler_is_flagged[dp-penalty-noise-x0.3]",
         "tests/audit/test_audit_subsampled.py::test_audit_tap_leaves_the_chain_unchanged[minibatch-penalty]",
         "tests/audit/test_audit_subsampled.py::test_minibatch_penalty_design_shift"),
        "10⁵ audited runs (~7 CPU-s). The flagging pipeline is the same for every sampler; "
        "minibatch-penalty's release and its audit design are checked on their own."),
    "tests/samplers/test_minibatch_penalty.py::test_gaussian_chain_targets_the_tempered_posterior[guided-walk-400]": (
        ("tests/samplers/test_dp_penalty.py::test_dp_penalty_is_exact_with_noise_and_tempering",
         "tests/samplers/test_minibatch_penalty.py::test_audit_tap_and_one_component_mode"),
        "a long chain against the exact posterior (~8 CPU-s). The penalty test's exactness is "
        "checked on the full-data sampler; the minibatch kernel's release and mode on their own."),
    "tests/kernels/test_noise_source.py::test_two_secure_runs_in_threads_draw_each_their_own_noise[dp-penalty]": (
        ("tests/test_secure_mode.py::test_every_noise_draw_is_secure[dp-hmc]",
         "tests/kernels/test_noise_source.py::test_noise_is_float64_with_x64_off_and_the_setting_is_kept"),
        "two runs in lockstep threads (~6 CPU-s). Every secure draw is counted against the "
        "accountant's releases under its own secret, and the noise source is carried by the "
        "kernel, not read from a process-global setting."),
    "tests/audit/test_audit_barker.py::test_miscalibrated_barker_is_flagged[noise-x0.3]": (
        ("tests/audit/test_audit.py::test_miscalibrated_sampler_is_flagged[dp-penalty-noise-x0.3]",
         "tests/audit/test_audit_barker.py::test_claim_is_the_default_accountant_and_the_smallest_batch"),
        "an audit program (~5 CPU-s). The flagging pipeline is the same; DP Barker's audit "
        "configuration (its claim, the smallest batch) stays."),
    "tests/runtime/test_driver.py::test_chunking_does_not_change_draws[rwmh-chunks0]": (
        ("tests/runtime/test_chunk_cache.py::test_the_cache_changes_no_draw_at_any_chunk_size",),
        "two chunk programs (~3 CPU-s). The guard runs a private sampler in chunks of 5 of 24 "
        "against one chunk, bit for bit, through the same driver."),
    "tests/runtime/test_driver.py::test_outputs_are_numpy_convertible_with_documented_shapes": (
        ("tests/test_api.py::test_result_parts_and_report",),
        "DP-HMC's reference run (~3 CPU-s). The result's arrays, their shapes and the draws "
        "repeating on a rejection are checked through dpmcmc.sample."),
    "tests/kernels/test_barker_correction.py::test_smaller_C_meets_targets_by_fft[1.0]": (
        ("tests/kernels/test_barker_correction.py::test_large_C_warns_and_misses_targets",
         "tests/kernels/test_barker_correction.py::test_c2_meets_targets_by_independent_fft_convolution"),
        "a fit and 10⁶ draws (~4 CPU-s). The on-demand fit runs in the first guard; the FFT check "
        "of the targets on the shipped C = 2 mixture in the second."),
    "tests/kernels/test_barker_correction.py::test_refit_reproduces_shipped_c2": (
        ("tests/kernels/test_barker_correction.py::test_c2_meets_targets_by_independent_fft_convolution",),
        "a fit (~2.5 CPU-s). The shipped mixture meets its targets by an independent check."),
    "tests/test_secure_mode.py::test_every_noise_draw_is_secure[dp-barker]": (
        ("tests/test_secure_mode.py::test_every_noise_draw_is_secure[dp-hmc]",
         "tests/test_secure_mode.py::test_secure_mode_keeps_minibatches_and_the_barker_correction_secret"),
        "a secure run (~2 CPU-s). DP Barker's secure noise and correction are the second guard's."),
    "tests/test_secure_mode.py::test_every_noise_draw_is_secure[minibatch-penalty]": (
        ("tests/test_secure_mode.py::test_every_noise_draw_is_secure[dp-sgld]",
         "tests/test_secure_mode.py::test_secure_mode_keeps_minibatches_and_the_barker_correction_secret"),
        "a secure run (~2 CPU-s). A subsampled sampler's secure draws are dp-sgld's case; the "
        "minibatches' secrecy the second guard's."),
    "tests/samplers/test_sgld.py::test_divergence_keeps_the_old_state": (
        ("tests/samplers/test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection[dp-hmc-params1]",),
        "a run (~2 CPU-s). A divergence is a rejection that keeps the old state in the guard."),
    "tests/runtime/test_chunk_cache.py::test_cached_step_keeps_the_contract": (
        ("tests/runtime/test_chunk_cache.py::test_the_cache_changes_no_draw_at_any_chunk_size",),
        "a cached kernel (~2 CPU-s). The cache changes no draw at any chunk size in the guard."),
    "tests/test_api.py::test_mid_chain_nan_is_a_counted_rejection[dp-hmc-params1]": (
        ("tests/test_api.py::test_mid_chain_nan_is_a_counted_rejection[dp-penalty-params0]",
         "tests/samplers/test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection[dp-hmc-params1]"),
        "a run (~2 CPU-s). The count is the driver's, the same for dp-penalty; DP-HMC's "
        "non-finite steps are rejections in the second guard."),
    "tests/runtime/test_driver_data_argument.py::test_builder_path_secure_mode_and_chunks_equal_closure_path": (
        ("tests/runtime/test_driver_data_argument.py::test_sample_draws_equal_the_closure_path[dp-hmc]",
         "tests/test_secure_mode.py::test_every_noise_draw_is_secure[dp-hmc]",
         "tests/runtime/test_chunk_cache.py::test_the_cache_changes_no_draw_at_any_chunk_size"),
        "three programs (~3 CPU-s). The builder path's draws equal the closure path's in the "
        "first guard, its secure runs draw only secure noise in the second, its chunks change no "
        "draw in the third."),
    "tests/samplers/test_barker.py::test_audit_tap_reports_the_release_and_does_not_change_the_chain": (
        ("tests/audit/test_audit_barker.py::test_audit_tap_leaves_the_chain_unchanged",
         "tests/samplers/test_barker.py::test_release_noise_is_the_documented_gaussian"),
        "a tapped and a plain chain (~3 CPU-s). DP Barker's tap leaves the chain unchanged in the "
        "audit's own test; its release is the documented Gaussian in the second guard."),
    "tests/records/test_sharding.py::test_sharded_equals_unsharded_on_four_host_devices": (
        ("tests/records/test_sharding.py::test_one_device_mesh_matches_plain_run",),
        "a 4-device child process (~5 CPU-s), the last of the default run. The mesh path runs on "
        "one device in the guard; a sharded sum only reorders the blocks' compensated sums "
        "(every other 4-device test is slow too, see HOST_DEVICE_CHILD)."),
}

#: ``node id -> marked slow?`` of every test this session collected (filled by conftest's
#: collection hook, before ``-m`` deselects): what tests/test_suite_budget.py checks against.
COLLECTED: dict[str, bool] = {}


# Stop 38's cut, in two tables (one per part of the suite) merged into SLOW_CASES below.
#: The kernels, models, runtime and records tests.
_PLD = "tests/accounting/test_accounting_pld.py::"
_PLD_WHY = ("the same property drawn at q = 0.001 (grids of 10^6 points when sigma is near 1: "
            "~0.2 CPU-s a composition on average, up to 2 s, most of the property tests' cost). "
            "The guard draws it at q = 0.01 to 1; the held reference values check q = 0.001.")
SLOW_CASES_CORE: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/runtime/test_driver.py::test_samplers_run_in_float32_mode": (
        ("tests/kernels/test_noise_source.py::test_noise_is_float64_with_x64_off_and_the_setting_is_kept",),
        "a dp-hmc chain program in the x64-off child (~1.5 CPU-s). The driver scopes 64-bit types "
        "to every run alike; the guard runs dp-penalty through dpmcmc.sample in that child "
        "(float64 draws and noise, the global setting still off afterwards)."),
    "tests/experiments/test_experiments.py::test_mmd_detects_half_sd_mean_shift": (
        ("tests/diagnostics/test_diagnostics.py::test_mmd_test_power",),
        "ten permutation tests on 2000 points (~2 CPU-s). The experiments' metric is "
        "dpmcmc.diagnostics.mmd_test, whose power (1 sd shift, 10 seeds) and false alarms (10 "
        "same-distribution controls, at most one flagged: P < 0.0043) the guard checks."),
    "tests/kernels/test_warmup.py::test_adaptation_follows_the_real_releases[dp-penalty]": (
        ("tests/kernels/test_warmup.py::test_warmup_is_paid_like_any_iteration_and_dropped_from_the_draws",),
        "an adaptive program (~1.5 CPU-s). The guard adapts dp-penalty on D1 and D2 with the real "
        "releases through dpmcmc.sample (one program: the data are its argument), and they "
        "adapt differently: the power of the released-values-only test."),
    "tests/kernels/test_warmup.py::test_adaptation_follows_the_real_releases[dp-sgld]": (
        ("tests/kernels/test_warmup.py::test_warmup_is_paid_like_any_iteration_and_dropped_from_the_draws",
         "tests/kernels/test_warmup.py::test_samplers_without_an_accept_step_refuse_a_short_warmup[dp-sgld]"),
        "an adaptive program (~1.5 CPU-s). The real-releases power is shown on the shared "
        "adaptive_kernel by the first guard; dp-sgld's preconditioner adapts away from 1 in a "
        "dpmcmc.sample run in the second, on released draws only (since stop 39: data-blind "
        "releases, the same on two data sets)."),
    "tests/models/test_user_models.py::test_fast_path_equals_vmap[logaddexp]": (
        ("tests/models/test_user_models.py::test_fast_path_equals_vmap[softplus]",),
        "a program of every pass (~0.4 CPU-s). jax.nn.softplus is a jitted jnp.logaddexp, the "
        "custom_jvp of this case, through the same passes and checks."),
    "tests/models/test_user_models.py::test_fast_path_equals_vmap[log_sigmoid]": (
        ("tests/models/test_user_models.py::test_fast_path_equals_vmap[softplus]",),
        "a program of every pass (~0.4 CPU-s). jax.nn.log_sigmoid is a jitted -softplus(-x): the "
        "guard's sub-jaxprs, through the same passes and checks."),
    "tests/models/test_user_models.py::test_builtin_under_rwmh[banana]": (
        ("tests/models/test_user_models.py::test_logistic_regression_under_every_sampler[minibatch-penalty]",
         "tests/models/test_user_models.py::test_builtin_batch_functions_equal_vmap[banana]"),
        "a chain program (~0.8 CPU-s). A built-in's unrolled forward pass in a chain is the first "
        "guard's (the logistic regression's clipped per-example ratios; the gaussian's rwmh run "
        "is slow too since stop 41); the banana's unrolled batch function equals vmap in the "
        "second."),
    "tests/models/test_user_models.py::test_kitchen_sink_model_under_every_sampler[dp-hmc]": (
        ("tests/models/test_user_models.py::test_kitchen_sink_model_under_every_sampler[dp-penalty]",
         "tests/models/test_user_models.py::test_fast_path_equals_vmap[custom_vjp]",
         "tests/models/test_user_models.py::test_logistic_regression_under_every_sampler[dp-sgld]",
         "tests/runtime/test_driver_data_argument.py::test_sample_draws_equal_the_closure_path[dp-hmc]"),
        "four sub-models through L + 1 gradient passes (~3 CPU-s). The kitchen sink runs in a "
        "chain under dp-penalty; every pass, the clipped gradient sum included, equals vmap on "
        "each of its parts (test_fast_path_equals_vmap); a custom_jvp model's clipped gradient "
        "sum runs in a chain under dp-sgld; dp-hmc's passes run a per-record user function (the "
        "banana preset's) through the rewrite in a chain in the last guard."),
    "tests/kernels/test_mechanisms.py::test_blocked_passes_equal_one_pass[7]": (
        ("tests/kernels/test_mechanisms.py::test_blocked_passes_equal_one_pass[64]",),
        "a program of every pass (~0.4 CPU-s). Several blocks summed against one pass is the "
        "guard's (blocks of 64, the last one padded)."),
    "tests/accounting/test_adaptive_composition.py::test_spent_epsilon_survives_order_switching[dp-sgnht-params2-pld]": (
        ("tests/accounting/test_adaptive_composition.py::test_spent_epsilon_survives_order_switching[dp-sgld-params0-pld]",
         "tests/accounting/test_adaptive_composition.py::test_dp_sgnht_is_charged_dp_sgld_s_release[pld]"),
        "an order-switching attack (~0.4 CPU-s). dp-sgnht is charged dp-sgld's release and "
        "epsilon (second guard), so its attack is the first guard's."),
    "tests/accounting/test_adaptive_composition.py::test_spent_epsilon_survives_order_switching[dp-sgnht-params3-rdp]": (
        ("tests/accounting/test_adaptive_composition.py::test_spent_epsilon_survives_order_switching[dp-sgld-params1-rdp]",
         "tests/accounting/test_adaptive_composition.py::test_dp_sgnht_is_charged_dp_sgld_s_release[rdp]"),
        "an order-switching attack (~0.4 CPU-s). dp-sgnht is charged dp-sgld's release and "
        "epsilon (second guard), so its attack is the first guard's."),
    "tests/runtime/test_driver_data_argument.py::test_sample_draws_equal_the_closure_path[minibatch-penalty]": (
        ("tests/runtime/test_driver_data_argument.py::test_sample_draws_equal_the_closure_path[dp-hmc]",
         "tests/runtime/test_driver_data_argument.py::test_compiled_run_holds_no_data_constant[dp-hmc]"),
        "the closure path's program, its rows as constants (~2 CPU-s). Draws read from a "
        "parameter equal those read from constants bit for bit through the same driver in the "
        "first guard; the driver's program holds no data-sized constant and takes the data as "
        "entry parameters in the second (minibatch-penalty's own case of that is slow since "
        "stop 41: SLOW_CASES_C3)."),
}
# The PLD property tests' q = 0.001 twins, each guarded by its q >= 0.01 case and the held
# reference value at q = 0.001.
SLOW_CASES_CORE.update({
    f"{_PLD}{name}[q=0.001]": ((f"{_PLD}{name}[q>=0.01]",
                                f"{_PLD}test_reference_value[s=1,q=0.001,k=100000,eps=1]"), _PLD_WHY)
    for name in ("test_delta_nonincreasing_in_epsilon", "test_delta_nondecreasing_in_k",
                 "test_epsilon_inverts_delta", "test_substitute_dominates_legacy")})
#: The samplers, audit, tabular and top-level (API, plan, ledger, secure) tests.
SLOW_CASES_PATHS: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/audit/test_audit_subsampled.py::test_calibrated_subsampled_sampler_passes[dp-sgld]": (
        ("tests/audit/test_audit.py::test_miscalibrated_sampler_is_flagged[dp-penalty-noise-x0.3]",
         "tests/audit/test_audit_glm.py::test_calibrated_glm_passes_and_the_audit_has_power",
         "tests/audit/test_audit_subsampled.py::test_sgd_design_attains_the_dominating_pair[dp-sgld]",
         "tests/audit/test_audit_subsampled.py::test_sgd_statistic_is_the_mixture_log_likelihood_ratio",
         "tests/audit/test_audit_subsampled.py::test_audit_tap_leaves_the_chain_unchanged[dp-sgld]"),
        "an audit program through the CLI (~5 CPU-s, most of it the level-1 compilation). The "
        "audit's runner and claim check are dp-penalty's flagged case's, its threshold tests "
        "those of the noise-aware GLM's calibrated audit (stop 42: dp-penalty's calibrated "
        "audit is slow too, SLOW_CASES_B4); what is "
        "dp-sgld's own (its kernel attains the design's dominating pair, the statistic is that "
        "pair's exact log likelihood ratio, its tap leaves the chain unchanged) stays."),
    "tests/audit/test_audit_subsampled.py::test_cli_audit_dp_sgld_json": (
        ("tests/audit/test_audit_glm.py::test_calibrated_glm_passes_and_the_audit_has_power",),
        "reads the audit above (its cost). The CLI prints the AuditResult of dpmcmc.audit.audit "
        "as JSON in the noise-aware GLM's case, through the same command."),
    "tests/samplers/test_sgld.py::test_sgld_info_and_noise_scale": (
        ("tests/samplers/test_samplers_registry.py::test_subsampled_kernels_draw_the_sigma_of_their_release_event",
         "tests/audit/test_audit_subsampled.py::test_sgd_design_attains_the_dominating_pair[dp-sgld]",
         "tests/samplers/test_minibatch_penalty.py::test_release_noise_matches_theorem_8",
         "tests/samplers/test_minibatch_penalty.py::test_batch_indices_are_uniform_over_subsets[9-2-None]",
         "tests/samplers/test_sgld.py::test_sample_end_to_end[dp-sgld-extra0]"),
        "three programs, 24 000 releases (~4 CPU-s). dp-sgld's release draws the accountant's σ "
        "(first guard) around the exact clipped batch sum, every record clipped, with "
        "noise_multiplier·C as its σ (second); gaussian_mechanism's draws have the variance of "
        "the σ given (third, the same mechanism); sample_batch_indices draws uniform subsets "
        "(fourth); a run's steps are accepted, never diverged, with their clip fractions "
        "(fifth)."),
    "tests/samplers/test_sgld.py::test_miscalibration_hook_reaches_the_release": (
        ("tests/audit/test_audit_subsampled.py::test_sgd_design_attains_the_dominating_pair[dp-sgld]",
         "tests/audit/test_audit.py::test_miscalibrated_source_scales_noise_and_clip_and_does_not_leak"),
        "two release programs (~1.2 CPU-s). dp-sgld's tapped kernel draws its noise from the "
        "NoiseSource's noise_scale (first guard: at 1e-9 the released sums are exact), and the "
        "source scales the mechanism's noise (second)."),
    "tests/audit/test_audit_subsampled.py::test_sgd_design_attains_the_dominating_pair[dp-sgnht]": (
        ("tests/audit/test_audit_subsampled.py::test_sgd_design_attains_the_dominating_pair[dp-sgld]",
         "tests/audit/test_audit_subsampled.py::test_audit_tap_leaves_the_chain_unchanged[dp-sgnht]"),
        "a tapped-kernel program (~1 CPU-s). dp-sgnht releases through dp-sgld's "
        "release_batch_grad, in the same tapped stochastic-gradient core, under the same design: "
        "that release attains the dominating pair in the first guard; dp-sgnht's kernel steps "
        "through its tap exactly as without it in the second."),
    "tests/samplers/test_minibatch_penalty.py::test_batch_indices_large_population[16000-4000-60-False]": (
        ("tests/samplers/test_minibatch_penalty.py::test_batch_indices_are_uniform_over_subsets[9-2-0]",
         "tests/samplers/test_minibatch_penalty.py::test_uniform_below_is_lemire_multiply_shift"),
        "a batch program of its own (~0.7 CPU-s). The sorted rounds every draw here takes draw "
        "uniform subsets in the first guard (no refill slot: every collision goes on to them), "
        "distinct, in range and int32; the uniform draws below n are exact up to n = 2³¹ − 1 in "
        "the second. (The large population's other case is slow too since stop 41: "
        "SLOW_CASES_A3.)"),
    "tests/tabular/test_tabular.py::test_cli_sample_default_is_the_noise_aware_glm": (
        ("tests/test_ledger.py::test_glm_and_cli_charge_the_ledger",
         "tests/tabular/test_tabular.py::test_cli_sample_round_trip[t.csv]"),
        "a noise-aware GLM fit of its own shape, 4 x 1000 draws (~2.5 CPU-s). `dpmcmc sample` "
        "without --algorithm runs the noise-aware GLM, prints its plan and releases and saves "
        "its 4 x 1000 draws in the first guard (another table); the command's file round trip "
        "is the second's."),
}
#: Stop 39, part B (tests/samplers/, tests/audit/): the same format.
SLOW_CASES_B: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/samplers/test_samplers_registry.py::test_build_gives_a_kernel_with_the_contract[dp-hmc]": (
        ("tests/samplers/test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection[dp-hmc-params1]",),
        "a leapfrog program (~1.4 CPU-s). The guard builds DP-HMC's kernel through the registry "
        "and runs it with run_chains (init, steps, a scan over its state) and checks its info's "
        "flags and clip fraction."),
    "tests/samplers/test_samplers_registry.py::test_build_gives_a_kernel_with_the_contract[hmc]": (
        ("tests/samplers/test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection[hmc-params0]",),
        "a leapfrog program (~0.6 CPU-s). The guard checks HMC's kernel the same way."),
    "tests/samplers/test_noise_aware_glm.py::test_pure_early_rounds_release_in_one_program": (
        ("tests/tabular/test_tabular.py::test_poisson_count_target_runs_through_the_default_path",),
        "a program of its own (~0.6 CPU-s). The guard's Poisson fit (pure early rounds: its "
        "gradient is a K-norm release) releases them through the same nag._releases (the "
        "logistic default finds its point by objective perturbation instead); the split of the "
        "budget over them stays in "
        "test_pure_early_rounds_spend_the_budget_and_old_records_replay."),
}
SLOW_CASES.update(SLOW_CASES_CORE)
SLOW_CASES.update(SLOW_CASES_PATHS)

# Stop 39's cut, in three tables (one per part of the suite).
#: Part A: the models, kernels and records tests.
_CONTRACT = "tests/models/test_model_contract.py::"
SLOW_CASES_A: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/kernels/test_warmup.py::test_adaptation_reads_released_values_only[dp-sgld]": (
        ("tests/kernels/test_warmup.py::test_samplers_without_an_accept_step_refuse_a_short_warmup[dp-sgld]",),
        "an adaptive chain program (~1.5-2 CPU-s). The guard's long dpmcmc.sample runs draw "
        "data-blind releases on the two data sets (one program): the same preconditioner, "
        "adapted away from 1, and the same draws, from data whose clip fractions differ."),
    "tests/kernels/test_warmup.py::test_adaptation_reads_released_values_only[dp-sgnht]": (
        ("tests/kernels/test_warmup.py::test_samplers_without_an_accept_step_refuse_a_short_warmup[dp-sgld]",),
        "an adaptive chain program (~2 CPU-s). dp-sgnht adapts what dp-sgld adapts (LANGEVIN: "
        "a relative preconditioner from the warm-up draws) and steps through dp-sgld's "
        "tapped_stochastic_gradient and release_batch_grad; with data-blind releases the guard "
        "shows that core's chain and adaptation identical on two data sets (dpmcmc.sample's "
        "warm-up is adaptive_kernel's)."),
    "tests/kernels/test_mechanisms.py::test_blocked_passes_equal_one_pass[1000]": (
        ("tests/kernels/test_mechanisms.py::test_blocked_passes_equal_one_pass[64]",),
        "a program of every pass (~0.4 CPU-s). One padded block is the guard's last block: "
        "blocks of 64, the last one padded, summed against one pass."),
    "tests/kernels/test_mechanisms.py::test_blocked_passes_equal_one_pass[None]": (
        ("tests/kernels/test_mechanisms.py::test_blocked_passes_equal_one_pass[64]",
         "tests/models/test_user_models.py::test_fast_path_equals_vmap[softplus]"),
        "a program of every pass (~0.5 CPU-s). The unblocked clipped passes are the first "
        "guard's reference; the unblocked log-likelihood sum and sum-and-gradient equal sums of "
        "vmap in the second (and on every battery model)."),
    "tests/kernels/test_warmup.py::test_adaptation_reads_released_values_only[dp-penalty]": (
        ("tests/kernels/test_released_statistics.py::test_same_releases_on_different_data_give_the_same_flags[dp-penalty]",
         "tests/kernels/test_warmup.py::test_adaptation_reads_released_values_only[minibatch-penalty]"),
        "an adaptive chain program (~1.3 CPU-s). dp-penalty's chain on data-blind releases is "
        "identical on two data sets, flags and draws, in the first guard; its adaptation "
        "(RANDOM_WALK, through the shared adaptive_kernel) reads released values only in the "
        "second, on the minibatch penalty kernel."),
    **{f"{_CONTRACT}test_samplers_without_gradients_run_an_undifferentiable_model[{alg}]": (
        (f"{_CONTRACT}test_a_record_non_finite_at_theta0_does_not_decide_whether_a_private_run_starts[{alg}--1.0]",),
        "a chain program of its own (~1-2 CPU-s). The guard runs the same sampler on a "
        "likelihood written as the same while loop, which cannot be differentiated, in the "
        "chain program it compiles anyway.") for alg in ("dp-penalty", "dp-barker")},
}
SLOW_CASES.update(SLOW_CASES_A)
SLOW_CASES.update(SLOW_CASES_B)

#: Part A, stop 40: the samplers, kernels, records, diagnostics and experiments tests.
SLOW_CASES_A2: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/samplers/test_samplers_nan.py::test_nan_prior_is_a_rejection[rwmh-params0]": (
        ("tests/samplers/test_samplers_nan.py::test_nan_likelihood_is_a_rejection_nonprivate[rwmh-params0]",),
        "a chain program of its own (~0.6 CPU-s). The guard's rwmh chain runs on NAN_BOTH, "
        "whose prior is NAN_PRIOR's (NaN beyond θ1 > 0.2, a small step from its start): it "
        "never crosses that wall either, and flags divergences."),
}
SLOW_CASES.update(SLOW_CASES_A2)

# Stop 40's cut, part B (the top-level test files, tests/tabular and tests/audit).
SLOW_CASES_B2: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/tabular/test_tabular.py::test_linear_regression_recovers_coefficients_on_the_original_scale": (
        ("tests/tabular/test_tabular.py::test_back_transformation_exact_on_known_example",
         "tests/tabular/test_tabular.py::test_back_transformation_preserves_the_linear_predictor",
         "tests/tabular/test_tabular.py::test_design_clips_covariates_keeps_every_row_and_scales_by_declared_bounds",
         "tests/tabular/test_tabular.py::test_private_run_uses_every_row_despite_out_of_range_covariates"),
        "a non-private HMC program of its own (~2 CPU-s, 90 % compilation). What it checks on "
        "the table path is the scaling: covariates and a linear target into [-1, 1] by the "
        "declared bounds (third guard) and the draws back to the original scale, intercept and "
        "the target's mid and half-width included, exactly (first guard; the second keeps the "
        "linear predictor on random boxes); the table path's run end to end, named coefficients "
        "out, is the fourth's."),
}
SLOW_CASES.update(SLOW_CASES_B2)

# Stop 40's cut, in three tables (one per part of the suite).
#: Part C (tests/models/, tests/runtime/, tests/accounting/): the same format.
_ACC = "tests/accounting/"
SLOW_CASES_C2: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/models/test_models.py::test_batch_functions_match_vmap[gaussian-correlated]": (
        ("tests/models/test_models.py::test_batch_functions_match_vmap[gaussian-random-4d]",),
        "its own programs and data (~0.7 CPU-s). The guard runs the same Gaussian batch "
        "functions, gradients and views against vmap, with a random covariance and every "
        "other parameter away from its default."),
    f"{_ACC}test_accounting_budget.py::test_max_iterations_is_exact[dp-sgld-pld-substitute-2.5-100-eps1-chains2]": (
        (f"{_ACC}test_accounting_budget.py::test_max_iterations_is_exact[dp-sgld-pld-substitute-1.5-100-eps1-chains2]",),
        "a PLD search of its own (~0.8 CPU-s). The guard checks the same exactness "
        "(delta(k) <= delta < delta(k + 1)) for the same sampler, accountant, relation and "
        "chains at noise multiplier 1.5."),
    f"{_ACC}test_accounting_pure.py::test_matches_dp_accounting_pld_of_gaussian_and_randomized_response[0.5-1.0]": (
        (f"{_ACC}test_accounting_pure.py::test_matches_dp_accounting_pld_of_gaussian_and_randomized_response[1.0-0.3]",
         f"{_ACC}test_accounting_pure.py::test_matches_dp_accounting_pld_of_gaussian_and_randomized_response[2.5-0.1]"),
        "an oracle's PLD of its widest Gaussian (~0.5 CPU-s). The guards compare the same "
        "composition (a Gaussian and two randomized responses, at the same four eps) with "
        "dp_accounting's at two other (e, mu), the first with mu = 0.3 close to this one's."),
    f"{_ACC}test_adaptive_composition.py::test_order_switching_beats_old_composition_and_not_the_new[2.0-0.05-100-0.5-0.001]": (
        (f"{_ACC}test_adaptive_composition.py::test_order_switching_beats_old_composition_and_not_the_new[1.1785113019775793-0.01-100-1.0-0.001]",
         f"{_ACC}test_adaptive_composition.py::test_order_switching_beats_old_composition_and_not_the_new[0.8-0.05-50-2.0-0.001]"),
        "an attack of 100 compositions on a fine grid (~0.4 CPU-s). The guards are the issue's "
        "two cases of the same attack against the old and the new composition, k = 100 "
        "included."),
    f"{_ACC}test_accounting_pld.py::test_halving_grid_changes_little_and_stays_below[1.1785113019775793-0.01-1000-2.0-substitute-legacy]": (
        (f"{_ACC}test_accounting_pld.py::test_halving_grid_changes_little_and_stays_below[1.0-0.01-2000-2.0-substitute-legacy]",),
        "two compositions on fine grids (~0.25 CPU-s). The guard halves the grid of the same "
        "pair at a nearby sigma, q and eps, with twice the releases."),
    **{f"{_ACC}test_adaptive_composition.py::test_spent_epsilon_survives_order_switching[minibatch-penalty-params{i}-{acc}]": (
        (f"{_ACC}test_adaptive_composition.py::test_spent_epsilon_survives_order_switching[dp-sgld-params{i - 4}-{acc}]",
         f"{_ACC}test_adaptive_composition.py::test_minibatch_penalty_is_charged_dp_sgld_s_release[{acc}]"),
        "an order-switching attack of 200 compositions (~0.4 CPU-s). minibatch-penalty at tau = 1 "
        "is charged dp-sgld's release at noise multiplier 2 (second guard: the same sigma, q "
        "and epsilon), whose attack the first guard runs.") for i, acc in ((4, "pld"), (5, "rdp"))},
}
SLOW_CASES.update(SLOW_CASES_C2)

# Stop 41's cut, part A (tests/samplers/, tests/kernels/, tests/records/, tests/diagnostics/,
# tests/experiments/): long statistical tests (a Monte Carlo check of a law, a chain against an
# exact posterior, an audit of many runs) and per-sampler twins of a shared property, each with a
# default-run guard of the same code path; the statistical property itself runs under -m slow.
_S, _K = "tests/samplers/", "tests/kernels/"
SLOW_CASES_A3: dict[str, tuple[tuple[str, ...], str]] = {
    **{f"{_S}test_noise_aware_glm.py::test_audit_transcript_privacy_profile_with_the_knorm_round[{case}]": (
        (f"{_S}test_noise_aware_glm.py::test_report_charges_what_the_mechanisms_draw",
         f"{_S}test_noise_aware_glm.py::test_per_record_bounds_hold_on_the_whole_box",
         f"{_S}test_noise_aware_glm.py::test_poisson_sensitivity_holds_on_adversarial_records"),
        "an audit of 500 transcripts per noise scale, in one program of its own (~4.5 CPU-s "
        "for the pair). By default the guards check nag's releases: each Gaussian sigma is the "
        "charged mu's and the pure releases the charged epsilons, composing to the budget "
        "(first); the clip bounds hold for every record of the box and for adversarial Poisson "
        "records (second, third). tests/audit/test_audit_glm.py's default audit of the fit's "
        "releases (calibrated passes, noise x0.3 flagged) also runs. The transcript's empirical "
        "privacy profile and its power run under -m slow only.") for case in ("1.0-True", "0.5-False")},
    f"{_S}test_noise_aware_glm.py::test_linear_family_is_exact_in_one_round": (
        ("tests/tabular/test_glm_calibration.py::test_linear_residual_sd_inferred_is_calibrated",
         f"{_S}test_noise_aware_glm.py::test_linear_plan_releases_the_sum_of_squares_within_the_budget"),
        "a linear nag.fit program and 20 000 draws against the conjugate posterior (~1.8 "
        "CPU-s). By default the first guard (a must-stay calibration test) runs the linear "
        "family's one-round fit on simulated tables and checks that its intervals cover the "
        "truth at the nominal rates and are informative; the second the linear plan's releases "
        "and their budget, with and without a declared residual sd. The noise-free limit's "
        "exactness runs under -m slow only."),
    f"{_S}test_dp_hmc.py::test_dp_hmc_is_exact_with_noise_clipped_gradients_and_tempering": (
        (f"{_S}test_dp_penalty.py::test_dp_penalty_is_exact_with_noise_and_tempering",
         f"{_S}test_dp_penalty.py::test_dp_penalty_without_correction_is_detected",
         f"{_S}test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection[dp-hmc-params1]",
         "tests/kernels/test_samplers_halton.py::test_dp_hmc_releases_L_plus_1_gradients_per_iteration"),
        "a DP-HMC chain program against the exact tempered posterior (~3 CPU-s). DP-HMC's "
        "accept step is the shared penalty_accept, whose exactness with noise and tempering, "
        "and the power of the check against a missing correction, the first two guards run on "
        "DP penalty; DP-HMC's own chain runs by default in the third (a divergence is a "
        "rejection that keeps the state) and the fourth (L + 1 clipped gradient releases per "
        "iteration, as charged). DP-HMC's exactness runs under -m slow only."),
    f"{_S}test_hmc.py::test_hmc_is_exact_tempered": (
        (f"{_S}test_dp_penalty.py::test_dp_penalty_is_exact_with_noise_and_tempering",
         f"{_S}test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection[hmc-params0]"),
        "a non-private HMC chain program against the exact posterior (~1.2 CPU-s). The same "
        "exactness design (tests/exactness.py) runs by default on DP penalty (first guard); "
        "HMC's leapfrog chain runs in the second (a divergent trajectory is a rejection that "
        "keeps the state). HMC's exactness runs under -m slow only."),
    **{f"{_K}test_barker_correction.py::{name}": (
        (f"{_S}test_barker.py::test_noisy_test_matches_the_corrected_barker_probability",
         f"{_K}test_barker_correction.py::test_c2_meets_targets_by_independent_fft_convolution",
         f"{_K}test_barker_correction.py::test_sample_correction_is_pure_and_jittable"),
        f"10⁶ draws of sample_correction shared by three Monte Carlo tests, here {what} (~1.5 "
        "CPU-s for the three, the draws included). By default the first guard tests the law "
        "of N(0, C) + X_corr, drawn by sample_correction inside DP Barker's noisy test, "
        "against its closed form at 13 points (binomial, with power against a forgotten "
        "variance); the second the shipped mixture's CDF against the logistic by an "
        "independent FFT convolution; the third the sampler's purity, shape and float64. The "
        "10⁶-draw checks of the whole CDF and the far tails run under -m slow only.")
       for name, what in (("test_monte_carlo_sum_matches_logistic_dkw", "a DKW bound on the CDF"),
                          ("test_monte_carlo_tail_frequencies", "the far tails' frequencies"))},
    f"{_S}test_minibatch_penalty.py::test_sensitivity_bound_random_batches": (
        (f"{_S}test_minibatch_penalty.py::test_sensitivity_bound_brute_force[0.3-1.0-3]",
         f"{_S}test_minibatch_penalty.py::test_sensitivity_bound_brute_force[40.0-0.01-5]"),
        "a hypothesis sweep, one program per batch size (~1.2 CPU-s). The guards (two of the "
        "twenty brute-force cases, all in the default run: batch sizes 1 to 5 at four (k, c0) "
        "pairs) check the same bound of the same f by exhaustive substitutions on a grid "
        "holding +-c0: never exceeded, and attained. The random batches run under -m slow "
        "only."),
    f"{_S}test_minibatch_penalty.py::test_batch_indices_large_population[100000-500-400-True]": (
        (f"{_S}test_minibatch_penalty.py::test_batch_indices_are_uniform_over_subsets[9-2-None]",
         f"{_S}test_minibatch_penalty.py::test_uniform_below_is_lemire_multiply_shift"),
        "a program of its own for 400 batches of 500 from 10⁵ (~1.2 CPU-s). By default the "
        "first guard runs the same rounds path (b <= n/4, with the refill of the first round's "
        "collisions) and checks distinct, in-range indices and a uniform law over all subsets "
        "(chi-square) and int32; the second the uniform draws below n = 10⁵ bit for bit. The inclusion "
        "counts at a large population run under -m slow only."),
    f"{_S}test_sgld.py::test_langevin_noise_share_plus_privacy_noise_is_the_step_variance": (
        (f"{_S}test_samplers_registry.py::test_subsampled_kernels_draw_the_sigma_of_their_release_event",
         f"{_S}test_sgld.py::test_registry_validation_langevin_noise[0.0]",
         f"{_S}test_sgld.py::test_registry_validation_langevin_noise[1.5]",
         f"{_S}test_sgld.py::test_sample_end_to_end[dp-sgld-extra0]"),
        "4000 vmapped DP-SGLD steps, a program of its own (~1.3-1.6 CPU-s). By default the "
        "first guard checks that the step's release draws the accountant's sigma (and "
        "tests/audit/test_audit_subsampled.py's dp-sgld case that the release attains its "
        "dominating pair); the second and third that a Langevin share outside (0, 1] is "
        "refused, naming it; the fourth DP-SGLD's run end to end. The variance of a step with "
        "a Langevin share below one (its share plus the privacy noise) runs under -m slow only."),
    f"{_K}test_warmup.py::test_a_badly_scaled_random_walk_is_brought_near_its_target_acceptance": (
        (f"{_K}test_warmup.py::test_adaptation_reads_released_values_only[minibatch-penalty]",
         f"{_K}test_warmup.py::test_warmup_is_paid_like_any_iteration_and_dropped_from_the_draws"),
        "an adaptive RWMH chain of 600 iterations, a program of its own (~0.8 CPU-s). The "
        "first guard checks that the shared adaptive_kernel adapts the step scale (every "
        "chain's scale moved) of a random walk with an accept step; the second the warm-up "
        "through dpmcmc.sample, paid and dropped, with another data set adapting otherwise. "
        "That the adapted acceptance lands near its target runs under -m slow only."),
    f"{_S}test_barker.py::test_exact_limit_chain_is_exact[False]": (
        (f"{_S}test_barker.py::test_noisy_test_matches_the_corrected_barker_probability",
         f"{_S}test_barker.py::test_nan_ratios_are_clipped_and_nan_priors_rejected"),
        "a DP Barker chain program against the exact posterior (~1.7 CPU-s). By default the "
        "first guard checks that the noisy test accepts with the corrected Barker probability "
        "(the core of its exactness), the second DP Barker's chain on NaN ratios and priors "
        "(the exact-logistic limit, a guard here before stop 42, is slow: SLOW_CASES_A4). The "
        "chain's exactness runs under -m slow only."),
}
SLOW_CASES.update(SLOW_CASES_A3)

# Stop 41's cut, part C (tests/models/, tests/runtime/, tests/accounting/): the same format.
_DDA = "tests/runtime/test_driver_data_argument.py::"
SLOW_CASES_C3: dict[str, tuple[tuple[str, ...], str]] = {
    f"{_DDA}test_compiled_run_holds_no_data_constant[minibatch-penalty]": (
        (f"{_DDA}test_compiled_run_holds_no_data_constant[dp-hmc]",
         "tests/models/test_user_models.py::test_logistic_regression_under_every_sampler[minibatch-penalty]"),
        "a chain program of its own (~2.5 CPU-s). That the data reach the compiled run as entry "
        "parameters, never as constants, is the chain driver's (run_chains / compiled_chunk, the "
        "same for every kernel): the first guard checks it on the HLO of dpmcmc.sample's "
        "planned run (blocked layout, mask and float32 copy as parameters); minibatch-penalty "
        "runs end to end through dpmcmc.sample in the second. The raw-array layout's HLO check "
        "runs under slow only."),
    "tests/accounting/test_accounting_pld.py::test_reference_value[s=7.906,q=0.01,k=400000,eps=1]": (
        ("tests/accounting/test_accounting_pld.py::test_reference_value[s=7.906,q=0.01,k=100000,eps=1]",),
        "a composition of 400000 releases (~1.1 CPU-s). The guard checks the held value of the "
        "same pair (sigma, q, eps) after 100000 releases, legacy within tolerance and the "
        "default above it; the k = 400000 entry is checked under slow only."),
    "tests/accounting/test_reference.py::test_reference_value[max_iterations[dp-sgld,e=2,d=1e-06,n=100000,chains=1,acc=pld,nm=7.90569,b=1000]]": (
        ("tests/accounting/test_reference.py::test_reference_value[max_iterations[dp-sgld,e=2,d=1e-06,n=100000,chains=1,acc=pld,nm=1.17851,b=1000]]",
         "tests/accounting/test_accounting_pld.py::test_reference_value[s=7.906,q=0.01,k=100000,eps=1]",
         "tests/accounting/test_accounting_budget.py::test_pld_guesses_bracket_the_answer[substitute]",
         "tests/accounting/test_accounting_budget.py::test_pld_guesses_bracket_the_answer[substitute-legacy]"),
        "a PLD search for an iteration count at noise multiplier 7.9 (~1 CPU-s). The first "
        "guard checks the same held max_iterations call (dp-sgld, eps = 2, the same search, the "
        "legacy value within tolerance and the default at most it) at noise multiplier 1.18; "
        "the second the held delta of the same release (sigma 7.906, q = 0.01) after 100000 "
        "compositions; the third and fourth compute this very max_iterations call (the default "
        "and the legacy relation) and check it against its RDP and CLT starting points. Its "
        "comparison with the held value runs under slow only."),
    "tests/models/test_models.py::test_banana_exact_posterior_transforms_to_gaussian[0.01]": (
        ("tests/models/test_models.py::test_tempered_banana_density_matches_log_posterior",
         "tests/models/test_presets.py::test_thesis_exact_draws_agree_with_the_posterior_mean[thesis-tempered-banana-10d]"),
        "a program of 20000 exact draws and four KS tests (~0.4 CPU-s). The first guard checks "
        "the tempered banana's exact-posterior density against the model's log posterior "
        "(temperature 0.02), and its Gaussian parameters and posterior mean against closed forms; "
        "the second runs the same exact sampler through a tempered preset and checks its draws' "
        "mean. (Until stop 42 the untempered case, slow since then, was the first guard.) The "
        "tempered KS tests run under slow only."),
    "tests/models/test_user_models.py::test_builtin_under_rwmh[gaussian]": (
        ("tests/models/test_user_models.py::test_logistic_regression_under_every_sampler[minibatch-penalty]",
         "tests/models/test_user_models.py::test_unknown_primitive_model_under_a_sampler",
         "tests/models/test_user_models.py::test_builtin_batch_functions_equal_vmap[gaussian]",
         "tests/models/test_user_models.py::test_forward_passes_take_the_rewrite[gaussian]"),
        "an rwmh chain program (~0.85 CPU-s). A built-in's unrolled forward pass runs in a chain "
        "in the first guard (the logistic regression's row-major batch functions, its clipped "
        "per-example ratios); rwmh's own passes (the ratio and log-likelihood sums) run in a "
        "chain in the second; the gaussian's unrolled batch function equals vmap in the third, "
        "and the rewrite is taken inside the samplers' forward passes for it in the fourth. The "
        "built-in gaussian under rwmh runs under slow only (with every built-in under every "
        "sampler)."),
}
# The hockey-stick sweep against mpmath: two of the five (sigma, q, eps) points per relation stay
# in the default run (the closed-form check of each relation's own pair at k = 1).
_SINGLE = f"{_PLD}test_single_release_matches_mpmath_hockey_stick"
_SINGLE_DEFAULT = {"substitute": ("1.0-0.1-0.5", "0.5-0.02-3.0"),
                   "add-remove": ("1.0-0.1-0.5", "0.5-0.02-3.0"),
                   "substitute-legacy": ("3.0-0.3-0.2", "0.5-0.02-3.0")}
SLOW_CASES_C3.update({
    f"{_SINGLE}[{rel}-{point}]": (
        tuple(f"{_SINGLE}[{rel}-{kept}]" for kept in _SINGLE_DEFAULT[rel]),
        "an mpmath integral of the exact hockey stick and a PLD (~0.1 CPU-s). The guards check "
        "the same relation's single release against mpmath, within the same bounds, at two "
        "other (sigma, q, eps); this point runs under slow only.")
    for rel in _SINGLE_DEFAULT
    for point in ("1.0-0.01-0.01", "1.0-0.1-0.5", "0.7-0.05-1.0", "3.0-0.3-0.2", "0.5-0.02-3.0")
    if point not in _SINGLE_DEFAULT[rel]})
SLOW_CASES.update(SLOW_CASES_C3)


# Stop 41's cut, part B (the top-level test files, tests/tabular and tests/audit): long
# statistical tests moved to slow, each with a default-run guard on the same code path.
_RNG = "tests/test_secure_rng.py::"
_RNG_GUARDS = (f"{_RNG}test_vectorised_block_matches_reference", f"{_RNG}test_keystream_rfc_2_4_2",
               f"{_RNG}test_uniform_construction_is_exact",
               f"{_RNG}test_normal_construction_is_inversion_on_open_grid",
               f"{_RNG}test_split_and_fold_in_follow_documented_derivation")
_RNG_WHY = ("a Monte Carlo check of the law of the secure generator's output ({cost}). In the default "
            "run ChaCha20 is the RFC 8439 function bit for bit (RFC vectors, and an independent "
            "reference on arbitrary keys, nonces and counters), every derived key and stream is the "
            "documented ChaCha20 call, and the uniforms and normals are exactly the documented "
            "functions of its words (all mantissa bits, the inverse normal CDF on the open grid): "
            "the guards. The law of the output ({what}) is checked under -m slow only.")
SLOW_CASES_B3: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/tabular/test_glm_calibration.py::test_poisson_under_its_cap_is_calibrated": (
        ("tests/tabular/test_glm_calibration.py::test_linear_residual_sd_inferred_is_calibrated",
         "tests/tabular/test_glm_calibration.py::test_coverage_detects_an_overconfident_posterior",
         "tests/tabular/test_tabular.py::test_poisson_bad_cap_is_refused_naming_it_before_any_budget[declared0]",
         "tests/tabular/test_tabular.py::test_poisson_count_target_runs_through_the_default_path"),
        "a calibration study of 60 Poisson tables, one program of its own (~5-6.5 CPU-s). The "
        "default run keeps the cheapest family's calibration through the same simulate-fit-cover "
        "pipeline and default path (linear, first guard), the checker failing an overconfident "
        "posterior (second), the Poisson cap's refusal before any budget (third) and a Poisson "
        "fit through dpmcmc.glm's default path, its cap and clipping (fourth; ~3 CPU-s, back in "
        "the default run in stop 41 so that the family's fit runs there at all; the Poisson "
        "fit's projection and sensitivity are tests/samplers/test_noise_aware_glm.py's). Poisson "
        "coverage runs under -m slow only, with the rest of the grid (test_calibrated_on_more_cases)."),
    "tests/audit/test_audit_barker.py::test_calibrated_barker_passes": (
        ("tests/audit/test_audit_barker.py::test_claim_is_the_default_accountant_and_the_smallest_batch",
         "tests/audit/test_audit_barker.py::test_noiseless_releases_are_the_assumed_means_and_variances",
         "tests/audit/test_audit_barker.py::test_statistic_is_the_exact_log_likelihood_ratio",
         "tests/audit/test_audit_barker.py::test_audit_tap_leaves_the_chain_unchanged",
         "tests/audit/test_audit.py::test_miscalibrated_sampler_is_flagged[dp-penalty-noise-x0.3]",
         "tests/audit/test_audit_glm.py::test_calibrated_glm_passes_and_the_audit_has_power"),
        "DP Barker's calibrated audit, 5·10⁴ runs compiled at level 1 (~4.5 CPU-s). What is DP "
        "Barker's own stays in the default run: its claim is the default accountant's at the "
        "smallest batch (first guard), its kernel releases exactly the means and variances the "
        "statistic assumes (second), the statistic is their exact log likelihood ratio (third), "
        "the tap leaves the chain unchanged (fourth); the audit's runner and claim check are "
        "dp-penalty's flagged audit's (fifth), its threshold tests those of the noise-aware GLM's "
        "calibrated audit (sixth; stop 42 sent dp-penalty's calibrated audit to slow too: "
        "SLOW_CASES_B4). Barker's own empirical lower bound runs "
        "under -m slow only, as dp-sgld's, dp-sgnht's and minibatch-penalty's do."),
    "tests/audit/test_audit_barker.py::test_cli_audit_dp_barker_json": (
        ("tests/audit/test_audit_glm.py::test_calibrated_glm_passes_and_the_audit_has_power",),
        "reads DP Barker's calibrated audit above (its cost). The CLI prints the AuditResult of "
        "dpmcmc.audit.audit as JSON in the noise-aware GLM's audit, through the same command."),
    "tests/audit/test_audit_glm.py::test_miscalibrated_glm_is_flagged": (
        ("tests/audit/test_audit_glm.py::test_calibrated_glm_passes_and_the_audit_has_power",
         "tests/audit/test_audit.py::test_miscalibrated_sampler_is_flagged[dp-penalty-noise-x0.3]"),
        "an audit of its own (~1.2 CPU-s). The GLM audit's pair and statistic reach at least 0.6 "
        "of the claim on the calibrated fit (first guard: its power), and the audit flags a "
        "kernel whose noise source scales the noise by 0.3 (second, dp-penalty). The GLM's own "
        "noise x 0.3 flag runs under -m slow only."),
    "tests/tabular/test_tabular.py::test_glm_sampler_path_uses_the_defaults_and_warms_up": (
        ("tests/tabular/test_tabular.py::test_glm_sampler_path_passes_the_defaults_and_a_warm_up_to_sample",
         "tests/test_plan.py::test_plan_and_sample_share_one_planner_in_every_mode[False]",
         "tests/tabular/test_tabular.py::test_cli_sample_round_trip[t.csv]"),
        "a warm-up and a chain program of their own (~1.1-2 CPU-s). The table path hands "
        "dpmcmc.sample the rule-derived τ, clip and proposal and warmup='auto', whose plan warms "
        "up for half the iterations (first guard); what sample runs is its plan (second); the "
        "table path's run keeps the draws' shape it asks for (third). The warm-up run on a table "
        "runs under -m slow only."),
    f"{_RNG}test_uniform_ks": (_RNG_GUARDS, _RNG_WHY.format(
        cost="two 10⁵-draw programs, ~0.5 CPU-s", what="Kolmogorov-Smirnov against U(0, 1)")),
    f"{_RNG}test_uniform_uses_all_mantissa_bits": (_RNG_GUARDS, _RNG_WHY.format(
        cost="test_uniform_ks's programs, ~0.4 CPU-s",
        what="the lowest grid bit a fair coin in 10⁵ draws")),
    f"{_RNG}test_normal_goodness_of_fit_and_moments": (_RNG_GUARDS, _RNG_WHY.format(
        cost="two 10⁵-draw programs, ~0.7 CPU-s", what="KS, Cramér-von Mises, moments, tails")),
    f"{_RNG}test_split_streams_are_uncorrelated": (_RNG_GUARDS + (f"{_RNG}test_derived_keys_are_all_distinct",), _RNG_WHY.format(
        cost="a 2·10⁴-draw program, 12 streams, ~0.7 CPU-s",
        what="the pairwise and lag-1 correlations of sibling streams")),
    f"{_RNG}test_bits_are_balanced": (_RNG_GUARDS, _RNG_WHY.format(
        cost="a 10⁵-word program, ~0.2 CPU-s", what="each bit position set half the time")),
    f"{_RNG}test_permutation_is_uniform": (_RNG_GUARDS + (f"{_RNG}test_backend_neutral_helpers_dispatch",), _RNG_WHY.format(
        cost="a vmapped permutation program over 24 000 keys, ~0.6-0.9 CPU-s",
        what="all 24 orders of 4 items equally likely; a permutation of 7 is one in the last guard")),
}
SLOW_CASES.update(SLOW_CASES_B3)


# Stop 42, part A (tests/samplers, kernels, records, diagnostics, experiments).
_COLS = "tests/records/test_per_example_columns.py::"
SLOW_CASES_A4: dict[str, tuple[tuple[str, ...], str]] = {
    f"{_COLS}test_vectorize_columns_matches_vmap_through_sub_jaxprs": (
        (f"{_COLS}test_vectorize_columns_matches_vmap",),
        "three of the sweep's fifteen functions, ~0.5-0.7 CPU-s of tracing (custom_jvp, cond, "
        "where). The guard runs the same rewrite (vectorize_columns, small_operand_first, "
        "record_gradient) with the same checks against jax.vmap on the other twelve by "
        "default, its fallback (scatter-mul, a dynamic index) and elementwise rule included; "
        "the rewrite of user models built from custom_jvp, lax.cond and jnp.where is "
        "tests/models/test_user_models.py's default run. The three functions' checks run under "
        "-m slow only."),
    f"{_S}test_barker.py::test_exact_logistic_limit_is_the_barker_test": (
        (f"{_S}test_barker.py::test_noisy_test_matches_the_corrected_barker_probability",),
        "a Monte Carlo check of a law, 13 x 10⁴ accept decisions in a program of its own "
        "(~0.8 CPU-s). The guard runs the same release (release_barker) and accept step "
        "(barker_accept) through the same _acceptance_frequencies with the kernel's own "
        "mechanism and correction, and tests the frequencies against their closed form "
        "(binomial, family-wise 1e-3) with power against a forgotten noise variance. That the "
        "exact-logistic limit (testing.noiseless_mechanism with testing.logistic_correction) "
        "accepts with Barker's 1/(1 + e^-Δ) runs under -m slow only."),
    "tests/samplers/test_samplers_registry.py::test_build_gives_a_kernel_with_the_contract[rwmh]": (
        ("tests/samplers/test_samplers_registry.py::test_build_gives_a_kernel_with_the_contract[dp-penalty]",
         "tests/samplers/test_samplers_nan.py::test_nan_likelihood_is_a_rejection_nonprivate[rwmh-params0]"),
        "a first-step program of its own (~0.35 CPU-s). The contract is the registry's shared "
        "one: the first guard checks it (a Kernel, the state's shape and tree, the Info's flags "
        "and clip fraction) on dp-penalty's kernel; the second builds RWMH's kernel through the "
        "registry and runs it with run_chains (init, steps, a scan over its state), checking "
        "its info's boolean flags and clip fraction, as [hmc] and [dp-hmc]'s guards do."),
}
SLOW_CASES.update(SLOW_CASES_A4)

# Stop 42's cut, part B (the top-level test files, tests/tabular and tests/audit): the same
# format; each guard runs in the default run and is in this part or on the must-stay list.
SLOW_CASES_B4: dict[str, tuple[tuple[str, ...], str]] = {
    "tests/audit/test_audit.py::test_calibrated_sampler_passes_and_audit_has_power[dp-penalty]": (
        ("tests/audit/test_audit_glm.py::test_calibrated_glm_passes_and_the_audit_has_power",
         "tests/audit/test_audit.py::test_miscalibrated_sampler_is_flagged[dp-penalty-noise-x0.3]",
         "tests/audit/test_audit.py::test_pipeline_on_a_gaussian_pair_is_valid_and_has_power",
         "tests/audit/test_audit.py::test_audit_tap_leaves_the_chain_unchanged[dp-penalty]"),
        "an audit of 2·10⁵ runs compiled at level 1, a program of its own (~3.4 CPU-s). The "
        "default run keeps a calibrated audit through the same audit(), threshold selection, "
        "Clopper-Pearson bounds and claim check, not flagged and reaching 0.6 of its claim (the "
        "noise-aware GLM's, first guard); dp-penalty's own audit runner, far-row design and "
        "statistic flagging its kernel with the noise x 0.3 (second); the pipeline valid and "
        "powerful on the exact Gaussian pair the far-row design's statistic follows (third); "
        "dp-penalty's tapped release carrying the σ its accountant charges, the chain unchanged "
        "bit for bit (fourth). dp-penalty's empirical lower bound on a calibrated kernel runs "
        "under -m slow only, as dp-hmc's, dp-sgld's and DP Barker's do (at the 2·10⁴ runs the "
        "default run could afford it is 1.33 ± 0.36 over 40 keys, one of them 0: too weak)."),
    "tests/tabular/test_tabular.py::test_sampler_defaults_meet_their_public_rules[500-8]": (
        ("tests/tabular/test_tabular.py::test_sampler_defaults_meet_their_public_rules[10000-3]",
         "tests/tabular/test_tabular.py::test_sampler_defaults_meet_their_public_rules[22272-4]"),
        "the third size of a sweep of the table path's sizing rule (~0.4 CPU-s of plans and "
        "accounting searches). The same assertions (acceptance ceiling and DP-HMC kick at their "
        "targets, the raised τ's at ε = 4 and 1 with their bounded noise growth, DP-SGLD's "
        "multiplier the smallest that buys its target iterations) run by default at n = 10⁴, "
        "d = 3 and n = 22 272, d = 4 (the guards); the small-table size n = 500, d = 8 under "
        "-m slow only."),
}
SLOW_CASES.update(SLOW_CASES_B4)

# Stop 42's cut, part C (tests/models/, tests/runtime/, tests/accounting/): the same format.
_AC, _AB = f"{_ACC}test_adaptive_composition.py::", f"{_ACC}test_accounting_budget.py::"
SLOW_CASES_C4: dict[str, tuple[tuple[str, ...], str]] = {
    f"{_AC}test_dp_sgld_iterations_under_valid_composition": (
        (f"{_AB}test_max_iterations_is_exact[dp-sgld-pld-substitute-1.5-100-eps1-chains2]",
         "tests/accounting/test_reference.py::test_reference_value[max_iterations[dp-sgld,e=2,d=1e-06,n=100000,chains=1,acc=pld,nm=1.17851,b=1000]]",
         f"{_AC}test_order_switching_beats_old_composition_and_not_the_new[1.1785113019775793-0.01-100-1.0-0.001]",
         f"{_AC}test_spent_epsilon_survives_order_switching[dp-sgld-params0-pld]"),
        "a reference value: the issue's iteration count (628, the old composition's 874) found "
        "by a PLD search and six compositions (~1.4 CPU-s). By default dp-sgld's max_iterations "
        "is exact under the valid composition (first guard: delta(k) <= delta < delta(k + 1)) "
        "and equals a held value (second); the order-switching attack beats the old composition "
        "and not the new (third) and stays below delta at the epsilon spent reports (fourth). "
        "The count 628 against 874 runs under -m slow only."),
    **{f"{_AB}test_defaults_are_sample_s_defaults[{case}]": (
        (f"{_AB}test_defaults_are_sample_s_defaults[minibatch-penalty-params2]",
         f"{_AB}test_defaults_are_sample_s_defaults[dp-penalty-params0]",
         f"{_AC}test_dp_sgnht_is_charged_dp_sgld_s_release[pld]"),
        "a PLD search of its own, dp-sgld's release at noise multiplier 1.5 (~0.95 CPU-s; "
        "dp-sgnht's case reuses it). That max_iterations and spent default to the tightest "
        "accountant and to dpmcmc.sample's 4 chains is shared code (accounting.budget): the "
        "first guard checks it for a subsampled Gaussian release under the PLD (minibatch-"
        "penalty's), the second for a full-data one; dp-sgnht is charged dp-sgld's release "
        "(third). These two samplers' cases run under -m slow only.")
       for case in ("dp-sgld-params4", "dp-sgnht-params5")},
    "tests/models/test_models.py::test_banana_exact_posterior_transforms_to_gaussian[1.0]": (
        ("tests/models/test_models.py::test_tempered_banana_density_matches_log_posterior",
         "tests/models/test_presets.py::test_thesis_exact_draws_agree_with_the_posterior_mean[thesis-tempered-banana-10d]",
         "tests/models/test_models.py::test_banana_prior_sampler_matches_log_prior"),
        "a Monte Carlo check of a law: 20000 exact draws and four KS tests, a program of its own "
        "(~0.65 CPU-s). By default the first guard checks the banana's exact-posterior density "
        "against the model's log posterior at exact draws, and the Gaussian of g^-1(theta) and the "
        "posterior mean (001 Thm 13) against closed forms computed independently; the second "
        "runs the same exact sampler (banana_forward of that Gaussian) through a preset and checks "
        "its draws' mean; the third the map g^-1 on prior draws (their law and log density). The "
        "KS tests of the exact draws run under -m slow only."),
    "tests/models/test_models.py::test_circle_exact_posterior_draws": (
        ("tests/models/test_models.py::test_circle_log_likelihood_and_exact_density",
         "tests/models/test_models.py::test_circle_exact_density_normalised",
         "tests/models/test_presets.py::test_thesis_exact_draws_agree_with_the_posterior_mean[thesis-circle]"),
        "a Monte Carlo check of a law: 20000 exact draws, two KS tests and a mean, with the exact "
        "sampler's program (~0.5 CPU-s, split from the closed-form checks in stop 42). By default "
        "the first guard checks the likelihood's closed form and the exact posterior's density "
        "(circle_log_density) against the model's log posterior, the second that this density "
        "integrates to one, the third runs the circle's exact sampler through a preset and checks "
        "its draws' mean. The KS tests of the exact draws run under -m slow only."),
    "tests/runtime/test_chunk_buckets.py::test_a_run_in_the_same_bucket_compiles_no_chain_program_and_draws_alike": (
        ("tests/runtime/test_compile_cache.py::test_repeated_call_on_new_data_compiles_nothing",
         "tests/runtime/test_chunk_buckets.py::test_chunk_length_buckets"),
        "a dp-penalty chain program of its own, in a fresh program cache (~1 CPU-s). Since stop "
        "42 the first guard, whose program is the same model's and parameters' in chunks of "
        "chunk_length(10) == 10 (200 iterations with a progress bar), runs 180 iterations "
        "(chunks of chunk_length(9) == 10) and checks that no chain program is traced and the "
        "draws are the longer run's up to their length; the second checks the buckets "
        "themselves. The same check without a progress bar (one chunk for the whole run) runs "
        "under -m slow only."),
    "tests/models/test_models.py::test_gaussian_exact_posterior_draws_have_the_posterior_moments": (
        ("tests/models/test_models.py::test_gaussian_posterior_closed_form",
         "tests/models/test_models.py::test_tempered_gaussian_density_matches_log_posterior",
         "tests/models/test_presets.py::test_thesis_exact_draws_agree_with_the_posterior_mean[thesis-gauss-30d]"),
        "a Monte Carlo check of a law: 40000 exact draws' mean and covariance, the exact "
        "sampler's program (split from the closed-form checks in stop 42). By default the first "
        "guard checks the model's posterior mean and covariance against the conjugate update "
        "computed in the test, the second the exact posterior's density against the model's "
        "log posterior, the third runs the Gaussian exact sampler through a preset and checks "
        "its draws' mean. The moments of the tempered model's exact draws run under -m slow "
        "only."),
    f"{_ACC}test_accounting_pure.py::test_matches_dp_accounting_pld_of_gaussian_and_randomized_response[3.0-0.02]": (
        (f"{_ACC}test_accounting_pure.py::test_matches_dp_accounting_pld_of_gaussian_and_randomized_response[1.0-0.3]",
         f"{_ACC}test_accounting_pure.py::test_matches_dp_accounting_pld_of_gaussian_and_randomized_response[2.5-0.1]"),
        "an oracle's PLD of a narrow Gaussian (~0.2 CPU-s). The guards compare the same "
        "composition (a Gaussian and two randomized responses, at the same four eps) with "
        "dp_accounting's at two other (e, mu), the second with e = 2.5 near this one's 3. This "
        "point of the sweep runs under -m slow only."),
}
SLOW_CASES.update(SLOW_CASES_C4)
