// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title SponsorshipRegistry
/// @notice Records, once and for ever, that a wallet was sponsored. Only its treasury writes it.
/// @dev The treasury is fixed at construction (immutable), so reading it costs no storage access on the hot
///      path of `markSponsored`. `SponsorshipTreasury` deploys its own registry, passing itself.
contract SponsorshipRegistry {
    /// @notice The only account allowed to mark wallets.
    address public immutable treasury;

    mapping(address wallet => bool) private _sponsored;

    error ZeroAddress();
    error NotTreasury(address caller);
    error AlreadySponsored(address wallet);

    event TreasurySet(address indexed treasury);
    event WalletSponsored(address indexed wallet);

    constructor(address treasury_) {
        if (treasury_ == address(0)) revert ZeroAddress();
        treasury = treasury_;
        emit TreasurySet(treasury_);
    }

    /// @notice Whether `wallet` was ever sponsored.
    function isSponsored(address wallet) external view returns (bool) {
        return _sponsored[wallet];
    }

    /// @notice `isSponsored` for many wallets in one call, in the order given.
    function areSponsored(address[] calldata wallets) external view returns (bool[] memory result) {
        uint256 n = wallets.length;
        result = new bool[](n);
        for (uint256 i; i < n; ) {
            result[i] = _sponsored[wallets[i]];
            unchecked {
                ++i;
            }
        }
    }

    /// @notice Marks `wallet` as sponsored; reverts when it already is. Only the treasury.
    function markSponsored(address wallet) external {
        if (msg.sender != treasury) revert NotTreasury(msg.sender);
        if (_sponsored[wallet]) revert AlreadySponsored(wallet);
        _sponsored[wallet] = true;
        emit WalletSponsored(wallet);
    }
}
