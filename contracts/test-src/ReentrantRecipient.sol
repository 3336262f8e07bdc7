// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

interface ISponsorshipTreasury {
    function sponsor(address payable wallet, bytes32 requestIdHash) external;
    function registry() external view returns (address);
}

interface ISponsorshipRegistry {
    function isSponsored(address wallet) external view returns (bool);
}

/// @notice Test-only attacker: a sponsored "wallet" whose receive() re-enters the treasury's sponsor function.
contract ReentrantRecipient {
    ISponsorshipTreasury public immutable treasury;

    /// Wallet the re-entrant call asks to sponsor (this contract itself by default).
    address payable public target;
    /// When true the failure of the re-entrant call is re-thrown, failing the whole payment.
    bool public propagate;

    uint256 public payments;
    uint256 public reentryAttempts;
    bool public reentrySucceeded;
    bytes public reentryRevertData;
    /// Whether the registry already said "sponsored" while the payment was being received.
    bool public markedBeforePayment;

    constructor(ISponsorshipTreasury treasury_) {
        treasury = treasury_;
        target = payable(address(this));
    }

    function configure(address payable target_, bool propagate_) external {
        target = target_;
        propagate = propagate_;
    }

    /// Lets the contract act as a (compromised) relayer sponsoring itself.
    function sponsorSelf(bytes32 requestIdHash) external {
        treasury.sponsor(payable(address(this)), requestIdHash);
    }

    receive() external payable {
        payments += 1;
        markedBeforePayment = ISponsorshipRegistry(treasury.registry()).isSponsored(address(this));
        if (reentryAttempts >= 3) return;
        reentryAttempts += 1;
        try treasury.sponsor(target, bytes32(reentryAttempts)) {
            reentrySucceeded = true;
        } catch (bytes memory reason) {
            reentryRevertData = reason;
            if (propagate) {
                assembly ("memory-safe") {
                    revert(add(reason, 32), mload(reason))
                }
            }
        }
    }
}
